from django.contrib import admin

from agents_app.models import Agent, ProviderKey, Remote, Run


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "model", "reply_policy", "recovery_policy", "deleted_at"]
    list_filter = ["reply_policy", "recovery_policy", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["name", "model", "owner__username"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner", "main_chat"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "agent", "chat", "kind", "status", "attempt", "lease_owner", "created_at", "finished_at"]
    list_filter = ["status", "kind"]
    search_fields = ["id", "agent__name", "chat__title", "error"]
    list_select_related = ["agent", "chat"]
    raw_id_fields = ["agent", "chat", "thread", "trigger_message", "reply_message", "parent", "continues"]
    readonly_fields = ["id", "created_at", "started_at", "heartbeat_at", "finished_at", "dispatched_at"]


@admin.register(Remote)
class RemoteAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "kind", "url", "status", "last_checked_at"]
    search_fields = ["name", "url", "owner__username"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
    # The headers are secret: staff may replace them but never read them back.
    exclude = ["headers"]


@admin.register(ProviderKey)
class ProviderKeyAdmin(admin.ModelAdmin):
    list_display = ["owner", "provider", "hint", "created_at"]
    list_select_related = ["owner"]
    search_fields = ["owner__username"]
    # The key itself is never shown, not even encrypted.
    exclude = ["encrypted_key"]
    readonly_fields = ["owner", "provider", "hint", "created_at"]

    def has_add_permission(self, request):
        return False
