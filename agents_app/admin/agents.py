"""The admin of agents (edited through agents_app.services), workers, remotes, provider keys and
the admin history."""


from django import forms
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from agents_app import remotes, secrets
from agents_app import services as agent_services
from agents_app.models import Agent, ProviderKey, Remote, Worker
from hub.errors import HubError
from hub.staff_admin import (
    IdSearchMixin,
    ReadOnlyDetailMixin,
    admin_link,
    badge,
    excerpt,
    html_table,
    run_each,
    stamp,
)


class AgentAdminForm(forms.ModelForm):
    # A base URL typed without a scheme is taken as https (Django 6's default, said out loud).
    base_url = forms.URLField(required=False, assume_scheme="https", max_length=200)
    class Meta:
        model = Agent
        fields = ["owner", "name", "avatar", "description", "model", "base_url", "allow_private_network",
                  "system_prompt", "settings", "tools", "reply_policy", "recovery_policy"]

    def _post_clean(self):
        super()._post_clean()
        if self.errors:
            return
        try:
            agent_services.check_agent(self.instance)
        except HubError as exc:
            for field, problems in (exc.fields or {None: [exc.message]}).items():
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)


@admin.register(Agent)
class AgentAdmin(IdSearchMixin, admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ["name", "owner_or_shared", "model", "reply_policy", "recovery_policy", "chat_count",
                    "created_at", "deleted_at"]
    list_filter = [("owner", admin.EmptyFieldListFilter), ("deleted_at", admin.EmptyFieldListFilter),
                   "reply_policy", "recovery_policy"]
    search_fields = ["name", "model", "owner__username"]
    search_help_text = "A name, a model string (e.g. openai:) or the owner's username."
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
    show_full_result_count = False
    actions = ["delete_agents"]
    readonly_fields = ["main_chat_link", "created_at", "deleted_at", "member_of", "recent_runs"]
    fieldsets = [
        (None, {"fields": ["owner", "name", "avatar", "description", "model", "base_url", "allow_private_network"]}),
        ("Behaviour", {"fields": ["system_prompt", "settings", "tools", "reply_policy", "recovery_policy"]}),
        ("Where it is", {"fields": ["main_chat_link", "member_of", "created_at", "deleted_at"]}),
        ("Recent runs", {"fields": ["recent_runs"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(chats_n=Count("memberships"))

    def get_readonly_fields(self, request, obj=None):
        # The owner is chosen when the agent is made; a change would leave its main chat behind.
        return [*self.readonly_fields, "owner"] if obj is not None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False  # an agent is soft-deleted (the action), so its past messages keep their sender

    def save_model(self, request, obj, form, change):
        fields = {name: form.cleaned_data[name] for name in agent_services.EDITABLE_FIELDS
                  if name in form.cleaned_data}
        if change:
            agent_services.update_agent(agent=obj, **fields)
        else:
            created = agent_services.create_agent(owner=form.cleaned_data.get("owner"), **fields)
            obj.pk = created.pk
            obj.main_chat_id = created.main_chat_id

    @admin.display(description="owner", ordering="owner__username")
    def owner_or_shared(self, agent):
        return agent.owner.get_username() if agent.owner_id else "shared (every user)"

    @admin.display(description="chats", ordering="chats_n")
    def chat_count(self, agent):
        return agent.chats_n

    @admin.display(description="main chat")
    def main_chat_link(self, agent):
        return admin_link(agent.main_chat) if agent.main_chat_id else "— (shared agents have none)"

    @admin.display(description="member of")
    def member_of(self, agent):
        rows = [(admin_link(m.chat), m.chat.owner.get_username(), m.added_at.strftime("%Y-%m-%d %H:%M"))
                for m in agent.memberships.select_related("chat__owner").order_by("-added_at")[:50]]
        return html_table(("chat", "owner", "added"), rows)

    @admin.display(description="latest 20 runs")
    def recent_runs(self, agent):
        runs = agent.runs.select_related("chat").defer("checkpoint").order_by("-created_at")[:20]
        rows = [(admin_link(r, str(r.pk)[:8]), badge(r.status), r.kind, admin_link(r.chat, excerpt(r.chat.title, 30)),
                 stamp(r.created_at), excerpt(r.error, 60))
                for r in runs]
        link = format_html('<p><a href="{}?q={}">All runs of {}</a></p>', reverse("admin:agents_app_run_changelist"),
                           agent.name, agent.name)
        return format_html("{}{}", html_table(("run", "status", "kind", "chat", "created", "error"), rows), link)

    @admin.action(description="Delete (leaves every chat; its messages keep their sender)", permissions=["change"])
    def delete_agents(self, request, queryset):
        def delete(agent):
            if agent.deleted_at is not None:
                raise HubError("already deleted")
            agent_services.delete_agent(agent=agent)
            return "deleted"

        run_each(self, request, queryset, delete, verb="Delete agent")


@admin.register(Worker)
class WorkerAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["name", "state", "host", "pool", "concurrency", "pids", "started_at", "heartbeat_at"]
    search_fields = ["name", "host"]
    ordering = ["-heartbeat_at"]

    @admin.display(description="state")
    def state(self, worker):
        from agents_app import health

        return badge(health.worker_state(worker))


@admin.register(Remote)
class RemoteAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "kind", "url", "status", "last_checked_at"]
    search_fields = ["name", "url", "owner__username"]
    list_select_related = ["owner"]
    # The headers are secret: never shown. Remotes are made by their owners on /agents/remotes/.
    exclude = ["encrypted_headers"]
    readonly_fields = ["owner", "name", "kind", "url", "status", "last_checked_at"]

    def has_add_permission(self, request):
        return False

    def delete_model(self, request, obj):
        remotes.delete_remote(remote=obj)

    def delete_queryset(self, request, queryset):
        for remote in queryset:
            remotes.delete_remote(remote=remote)


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

    def delete_model(self, request, obj):
        secrets.delete_key(owner=obj.owner, provider=obj.provider)

    def delete_queryset(self, request, queryset):
        for key in queryset.select_related("owner"):
            secrets.delete_key(owner=key.owner, provider=key.provider)


@admin.register(LogEntry)
class LogEntryAdmin(ReadOnlyDetailMixin, admin.ModelAdmin):
    """Who did what in the admin (every action and repair records one)."""

    list_display = ["action_time", "user", "action_flag", "content_type", "object_link", "change_message"]
    list_filter = ["action_flag", "content_type"]
    search_fields = ["object_repr", "change_message", "user__username", "object_id"]
    list_select_related = ["user", "content_type"]
    date_hierarchy = "action_time"
    show_full_result_count = False

    @admin.display(description="object")
    def object_link(self, entry):
        if entry.content_type_id is None or entry.is_deletion():
            return entry.object_repr
        url = entry.get_admin_url()
        return format_html('<a href="{}">{}</a>', url, entry.object_repr) if url else entry.object_repr
