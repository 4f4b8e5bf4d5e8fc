from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agents_app import views as agent_views
from agents_app.admin import pages as agent_admin_pages
from chats import views as chat_views
from hub import views as hub_views

urlpatterns = [
    # Staff pages (health, repair) first: the admin's own URLs end in a catch-all.
    path("admin/", include("agents_app.admin.urls")),
    path("admin/", admin.site.urls),
    path("healthz", agent_admin_pages.healthz, name="healthz"),
    path("api/v1/", include("hub.api.urls")),
    path("settings/tokens/", hub_views.api_tokens, name="api_tokens"),
    path("settings/tokens/<int:token_id>/revoke/", hub_views.api_token_revoke, name="api_token_revoke"),
    path("settings/invitations/", hub_views.invitations, name="invitations"),
    path("settings/invitations/<int:invitation_id>/revoke/", hub_views.invitation_revoke, name="invitation_revoke"),
    path("login/", hub_views.HubLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", chat_views.signup, name="signup"),
    path("", include("chats.urls")),
    path("agents/", include("agents_app.urls")),
    path("usage/", agent_views.usage_page, name="usage"),
]

handler404 = "chats.views.not_found"
handler500 = "hub.unavailable.server_error"  # the database or Redis down answers 503, not 500
