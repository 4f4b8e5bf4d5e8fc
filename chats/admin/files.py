"""The admin of files in chats: each with its owner's total, type, size and whether its text was
read (and why not); staff can delete one (its bytes go with it)."""

from django.contrib import admin
from django.db.models import OuterRef, Subquery, Sum
from django.utils.html import format_html

from chats import services
from chats.attachments import files
from chats.models import Attachment
from hub.staff_admin import ReadOnlyDetailMixin, run_each


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "chat", "content_type", "size_shown", "owner_total", "text_status", "text_note",
                    "created_at"]
    list_filter = ["text_status", "content_type"]
    list_select_related = ["owner", "chat"]
    search_fields = ["name", "owner__username", "chat__title"]
    readonly_fields = ["download"]
    actions = ["delete_files"]

    def get_queryset(self, request):
        totals = (Attachment.objects.filter(owner=OuterRef("owner")).values("owner")
                  .annotate(total=Sum("size")).values("total"))
        return super().get_queryset(request).annotate(owner_bytes=Subquery(totals))

    @admin.display(description="size", ordering="size")
    def size_shown(self, attachment):
        return files.megabytes(attachment.size)

    @admin.display(description="owner's files", ordering="owner_bytes")
    def owner_total(self, attachment):
        return files.megabytes(attachment.owner_bytes or 0)

    @admin.display(description="file")
    def download(self, attachment):
        return format_html('<a href="{}?download=1">Download {}</a>', files.file_payload(attachment)["url"],
                           attachment.name)

    @admin.action(description="Delete (the file is gone from its message)", permissions=["change"])
    def delete_files(self, request, queryset):
        def delete(attachment):
            services.delete_file(attachment=attachment)
            return "deleted"

        run_each(self, request, queryset, delete, verb="Delete", log_deletion=True)
