"""Staff pages under /admin/ (each behind the admin's own staff check), before the admin's URLs."""

from django.contrib import admin
from django.urls import path

from agents_app.admin import pages as admin_pages

urlpatterns = [
    path("health/", admin.site.admin_view(admin_pages.health_page), name="admin-health"),
    path("repair/", admin.site.admin_view(admin_pages.repair_page), name="admin-repair"),
    path("usage/", admin.site.admin_view(admin_pages.usage_page), name="admin-usage"),
]
