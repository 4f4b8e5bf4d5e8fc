from django.conf import settings


def hub_settings(request):
    return {"allow_signup": settings.HUB_ALLOW_SIGNUP, "allow_invites": settings.HUB_ALLOW_INVITES}
