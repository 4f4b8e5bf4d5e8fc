from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from chats import views as chat_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", chat_views.signup, name="signup"),
    path("", include("chats.urls")),
    path("agents/", include("agents_app.urls")),
]

handler404 = "chats.views.not_found"
