from django.contrib import admin

from chats.models import Chat, ContextBlock, Membership, MemoryEntry, Message, SharedDocument, Thread


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["agent"]


class ThreadInline(admin.TabularInline):
    model = Thread
    extra = 0
    fields = ["title", "created_at", "last_activity_at"]
    readonly_fields = ["created_at", "last_activity_at"]


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin):
    list_display = ["title", "owner", "updated_at", "last_message_preview", "deleted_at"]
    list_filter = [("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["title", "description", "owner__username", "id"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "forked_from"]
    readonly_fields = ["id", "created_at", "updated_at"]
    inlines = [MembershipInline, ThreadInline]


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["title", "chat", "created_at", "last_activity_at"]
    search_fields = ["title", "chat__title"]
    list_select_related = ["chat"]
    raw_id_fields = ["chat"]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "chat", "thread", "kind", "subkind", "status", "sender_agent", "short_content", "created_at"]
    list_filter = ["kind", "status", "format"]
    search_fields = ["content", "chat__title"]
    list_select_related = ["chat", "thread", "sender_agent"]
    raw_id_fields = ["chat", "thread", "sender_user", "sender_agent", "run", "reply_to"]
    readonly_fields = ["created_at", "edited_at"]

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["chat", "agent", "added_at"]
    list_select_related = ["chat", "agent"]
    raw_id_fields = ["chat", "agent"]


class MemoryEntryInline(admin.TabularInline):
    model = MemoryEntry
    extra = 0
    fields = ["content", "chat", "agent", "created_at"]
    readonly_fields = ["created_at"]
    raw_id_fields = ["chat", "agent"]


@admin.register(ContextBlock)
class ContextBlockAdmin(admin.ModelAdmin):
    list_display = ["label", "owner", "max_tokens", "version", "updated_at"]
    search_fields = ["label", "content", "owner__username"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
    inlines = [MemoryEntryInline]


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = ["block", "short_content", "chat", "agent", "created_at"]
    list_select_related = ["block", "chat", "agent"]
    search_fields = ["content", "block__label"]
    raw_id_fields = ["block", "chat", "agent"]

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]


@admin.register(SharedDocument)
class SharedDocumentAdmin(admin.ModelAdmin):
    list_display = ["label", "key", "owner", "updated_at"]
    search_fields = ["label", "key", "content"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
