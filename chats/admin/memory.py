"""The admin of shared memory and the shared index: read-only; an entry can be forgotten."""


from django.contrib import admin

from chats import memory
from chats.admin.inlines import ReadOnlyInline
from chats.models import ContextBlock, MemoryEntry, SharedDocument
from hub.staff_admin import (
    ReadOnlyDetailMixin,
    excerpt,
    run_each,
)


class MemoryEntryInline(ReadOnlyInline):
    model = MemoryEntry
    fields = ["content", "chat", "agent", "created_at"]
    readonly_fields = fields


@admin.register(ContextBlock)
class ContextBlockAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["label", "owner", "max_tokens", "version", "updated_at"]
    search_fields = ["label", "owner__username"]
    list_select_related = ["owner"]
    inlines = [MemoryEntryInline]


@admin.register(MemoryEntry)
class MemoryEntryAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["block", "short_content", "chat", "agent", "created_at"]
    list_select_related = ["block", "chat", "agent"]
    search_fields = ["content", "block__label"]
    actions = ["forget_entries"]

    @admin.display(description="content")
    def short_content(self, entry):
        return excerpt(entry.content, 80)

    @admin.action(description="Forget (remove from the memory block)", permissions=["change"])
    def forget_entries(self, request, queryset):
        def forget(entry):
            memory.delete_entry(owner=entry.block.owner, entry_id=entry.pk)
            return "forgotten"

        run_each(self, request, queryset.select_related("block__owner"), forget, verb="Forget", log_deletion=True)


@admin.register(SharedDocument)
class SharedDocumentAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["label", "key", "owner", "updated_at"]
    search_fields = ["label", "key"]
    list_select_related = ["owner"]
