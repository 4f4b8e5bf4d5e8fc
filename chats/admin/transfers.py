"""The admin of import and export jobs: whose, what kind and format, how far it got, its report
and error. Read-only: a job is started and run by its owner's page or the API."""

from django.contrib import admin

from chats.models import Transfer
from hub.staff_admin import ReadOnlyDetailMixin


@admin.register(Transfer)
class TransferAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["created_at", "owner", "kind", "format", "status", "progress", "name", "finished_at"]
    list_filter = ["kind", "status", "format"]
    list_select_related = ["owner"]
    search_fields = ["owner__username", "name"]
    fields = ["id", "owner", "kind", "format", "scope", "status", "name", "total", "done", "report", "error",
              "created_at", "finished_at"]
    readonly_fields = fields

    @admin.display(description="progress")
    def progress(self, transfer):
        return f"{transfer.done} of {transfer.total}" if transfer.total else "—"
