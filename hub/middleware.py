"""The admin is for staff only: an ordinary user gets no admin page at all.

Django's admin would show a logged-in user without staff rights its own login form ("you are not
authorised"), which tells them the admin exists and where. Here, a logged-in user who is not
staff gets the site's ordinary 404 for every admin address, and a visitor who is not logged in
is sent to the site's log-in page (staff log in there too) instead of the admin's.
"""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404
from django.urls import reverse


class StaffOnlyAdminMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self._prefix = None

    def prefix(self) -> str:
        if self._prefix is None:
            self._prefix = reverse("admin:index")
        return self._prefix

    def __call__(self, request):
        if request.path.startswith(self.prefix()):
            user = request.user
            if not user.is_authenticated:
                logout = reverse("admin:logout")
                if request.path != logout:
                    # The admin's own log-in page hands its `next` on; any other page comes back to itself.
                    if request.path == reverse("admin:login"):
                        target = request.GET.get("next", self.prefix())
                    else:
                        target = request.get_full_path()
                    return redirect_to_login(target, settings.LOGIN_URL)
            elif not (user.is_active and user.is_staff):
                raise Http404("No such page.")
        return self.get_response(request)
