"""The temporary chats' token counts, read-only (the admin's Usage page sums them with the runs')."""

from django.contrib import admin

from agents_app.models import TemporaryChatUsage
from hub.staff_admin import ReadOnlyDetailMixin


@admin.register(TemporaryChatUsage)
class TemporaryChatUsageAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["run_id", "owner", "agent", "model", "input_tokens", "output_tokens", "finished_at"]
    list_select_related = ["owner", "agent"]
    search_fields = ["owner__username", "agent__name", "=run_id"]
    date_hierarchy = "finished_at"
    ordering = ["-finished_at"]
