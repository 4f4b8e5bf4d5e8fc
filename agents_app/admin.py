"""The admin of agents and their turns: find why a reply failed or stalled, and put it right.

Runs and workers are read-only rows; actions (recover now, cancel, retry) call the services of
agents_app.repair and record a LogEntry. Agents are edited through agents_app.services.
"""

from datetime import timedelta

from django import forms
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from agents_app import remotes, secrets
from agents_app import services as agent_services
from agents_app.models import Agent, ProviderKey, Remote, Run, Worker
from agents_app.repair import selectors as repair_selectors
from agents_app.repair import services as repair_services
from hub.errors import HubError
from hub.staff_admin import (
    EstimatedCountPaginator,
    IdSearchMixin,
    ObjectActionsMixin,
    ReadOnlyDetailMixin,
    admin_link,
    badge,
    excerpt,
    html_table,
    run_each,
    stamp,
)


def _who(request) -> str:
    return f"staff ({request.user.get_username()})"


def _seconds(delta) -> str:
    if delta is None:
        return "—"
    seconds = delta.total_seconds()
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class NeedsAttentionFilter(admin.SimpleListFilter):
    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request, model_admin):
        return [
            ("past_lease", "Running past its lease"),
            ("waiting", "Queued over a minute"),
            ("unsent", "Never sent to a worker"),
            ("cancel_pending", "Cancel asked, still running"),
            ("failed_today", "Failed in the last 24 h"),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        value = self.value()
        if value == "past_lease":
            return queryset.filter(status=Run.Status.RUNNING, lease_expires_at__lt=now)
        if value == "waiting":
            return queryset.filter(status=Run.Status.QUEUED, created_at__lt=now - timedelta(minutes=1))
        if value == "unsent":
            return queryset.filter(status=Run.Status.QUEUED, dispatched_at__isnull=True,
                                   created_at__lt=now - timedelta(seconds=30))
        if value == "cancel_pending":
            return queryset.filter(status=Run.Status.RUNNING, cancel_requested=True)
        if value == "failed_today":
            return queryset.filter(status=Run.Status.FAILED, finished_at__gte=now - timedelta(days=1))
        return queryset


@admin.register(Run)
class RunAdmin(IdSearchMixin, ObjectActionsMixin, ReadOnlyDetailMixin, admin.ModelAdmin):
    list_display = ["short_id", "status_badge", "agent", "chat_link", "worker", "created", "took", "error_excerpt"]
    list_filter = [NeedsAttentionFilter, "status", "kind", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["agent__name", "chat__title", "error", "lease_owner"]
    search_help_text = "An id (or its first 8 characters), an agent, a chat title, an error or a worker."
    list_select_related = ["agent", "chat"]
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # counting every filter's choices reads the whole table
    paginator = EstimatedCountPaginator
    ordering = ["-created_at"]
    actions = ["recover_now", "cancel_runs", "retry_runs"]
    object_actions = ("recover_now", "cancel_runs", "retry_runs")
    readonly_fields = [
        "id", "status_badge", "kind", "attempt", "agent_link", "chat_link", "thread", "question", "reply",
        "parent_link", "continues_link", "continued_by", "delegated", "timeline_link",
        "lease_owner", "lease_state", "heartbeat", "cancel_requested", "timings", "waited", "took",
        "error", "usage", "delta_count", "checkpoint_count", "history_table", "checkpoint_summary",
    ]
    fieldsets = [
        ("Turn", {"fields": ["id", "status_badge", "kind", "attempt", "agent_link", "chat_link", "thread",
                             "question", "reply", "timeline_link"]}),
        ("Recoveries and delegation", {"fields": ["continues_link", "continued_by", "parent_link", "delegated"]}),
        ("Worker and lease", {"fields": ["lease_owner", "lease_state", "heartbeat", "cancel_requested"]}),
        ("Timings", {"fields": ["timings", "waited", "took"]}),
        ("Outcome", {"fields": ["error", "usage", "delta_count", "checkpoint_count"]}),
        ("Status history", {"fields": ["history_table"]}),
        ("Checkpoint", {"fields": ["checkpoint_summary"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request):
        # The list never needs the checkpoint (the partial reply and model history can be large).
        queryset = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name == "agents_app_run_changelist":
            queryset = queryset.defer("checkpoint", "history", "usage")
        return queryset

    def get_urls(self):
        return [
            path("<path:object_id>/timeline/", self.admin_site.admin_view(self.timeline_view),
                 name="agents_app_run_timeline"),
        ] + super().get_urls()

    def timeline_view(self, request, object_id):
        from django.http import Http404

        run = self.get_object(request, object_id)
        if run is None:
            raise Http404("No such run.")
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        timeline = repair_selectors.run_timeline(run)
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "title": f"Timeline of {run}",
            "run": run, "timeline": timeline, "original": run,
            "rows": [(event, timeline.offset(event)) for event in timeline.events],
            "chain_rows": [
                (item, _seconds(item.started_at - item.created_at) if item.started_at else "—",
                 _seconds(item.finished_at - item.started_at) if item.started_at and item.finished_at else "—")
                for item in timeline.chain
            ],
        }
        return TemplateResponse(request, "admin/support/run_timeline.html", context)

    # Columns -----------------------------------------------------------------------------
    @admin.display(description="run", ordering="id")
    def short_id(self, run):
        return format_html('{}<br><span class="hub-muted">{} #{}</span>', str(run.pk)[:8], run.kind, run.attempt)

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        return badge(run.status)

    @admin.display(description="chat", ordering="chat__title")
    def chat_link(self, run):
        return admin_link(run.chat, excerpt(run.chat.title, 40))

    def get_object_actions(self, run):
        if run.status in (Run.Status.QUEUED, Run.Status.RUNNING):
            return ("recover_now", "cancel_runs")
        if run.status in (Run.Status.FAILED, Run.Status.CANCELLED) and not run.continuations.exists():
            return ("retry_runs",)
        return ()

    @admin.display(description="worker", ordering="lease_owner")
    def worker(self, run):
        # host:pid; the thread is on the run's page.
        return ":".join(run.lease_owner.split(":")[:2]) if run.lease_owner else "—"

    @admin.display(description="created", ordering="created_at")
    def created(self, run):
        return stamp(run.created_at)

    @admin.display(description="last heartbeat")
    def heartbeat(self, run):
        return stamp(run.heartbeat_at)

    @admin.display(description="times")
    def timings(self, run):
        rows = [(label, stamp(moment), f"+{(moment - run.created_at).total_seconds():.2f} s" if moment else "")
                for label, moment in (("queued", run.created_at), ("sent to a worker", run.dispatched_at),
                                      ("started", run.started_at), ("finished", run.finished_at))]
        return html_table(("", "time", "since queued"), rows)

    @admin.display(description="took")
    def took(self, run):
        if run.started_at is None:
            return "—"
        return _seconds((run.finished_at or timezone.now()) - run.started_at)

    @admin.display(description="waited in the queue")
    def waited(self, run):
        return _seconds((run.started_at or timezone.now()) - run.created_at)

    @admin.display(description="error")
    def error_excerpt(self, run):
        timeline = format_html('<a href="{}">timeline</a>', reverse("admin:agents_app_run_timeline", args=[run.pk]))
        if not run.error:
            return timeline
        return format_html("{}<br>{}", excerpt(run.error, 90), timeline)

    @admin.display(description="timeline")
    def timeline_link(self, run):
        return format_html('<a href="{}">timeline</a>', reverse("admin:agents_app_run_timeline", args=[run.pk]))

    # Detail ------------------------------------------------------------------------------
    @admin.display(description="agent")
    def agent_link(self, run):
        return admin_link(run.agent)

    @admin.display(description="question (trigger message)")
    def question(self, run):
        message = run.trigger_message
        if message is None:
            return "—"
        return format_html("{} · {}", admin_link(message, f"message {message.pk}"), excerpt(message.content, 200))

    @admin.display(description="reply message")
    def reply(self, run):
        message = run.reply_message
        if message is None:
            return "— (not started)"
        return format_html("{} {} · {} characters · {}", admin_link(message, f"message {message.pk}"),
                           badge(message.status), len(message.content), excerpt(message.content, 160))

    @admin.display(description="delegated by")
    def parent_link(self, run):
        return admin_link(run.parent, f"run {str(run.parent_id)[:8]}") if run.parent_id else "—"

    @admin.display(description="continues (after a recovery or retry)")
    def continues_link(self, run):
        return admin_link(run.continues, f"run {str(run.continues_id)[:8]}") if run.continues_id else "—"

    @admin.display(description="continued by")
    def continued_by(self, run):
        rows = [(admin_link(r, f"run {str(r.pk)[:8]}"), badge(r.status), r.kind, r.attempt)
                for r in run.continuations.order_by("created_at")]
        return html_table(("run", "status", "kind", "attempt"), rows)

    @admin.display(description="delegated runs")
    def delegated(self, run):
        rows = [(admin_link(r, f"run {str(r.pk)[:8]}"), badge(r.status), r.agent.name)
                for r in run.children.select_related("agent").order_by("created_at")]
        return html_table(("run", "status", "agent"), rows)

    @admin.display(description="lease")
    def lease_state(self, run):
        if run.lease_expires_at is None:
            return "—"
        left = (run.lease_expires_at - timezone.now()).total_seconds()
        if left >= 0:
            return f"expires {run.lease_expires_at:%H:%M:%S} (in {left:.0f} s)"
        return format_html("{} {}", badge("failed"), f"expired {-left:.0f} s ago ({run.lease_expires_at:%H:%M:%S})")

    @admin.display(description="status history")
    def history_table(self, run):
        rows = [(entry.get("at", "")[:23].replace("T", " "), badge(entry.get("status", "?")),
                 entry.get("worker", ""), entry.get("error") or entry.get("reason") or entry.get("kind") or "")
                for entry in run.history or []]
        return html_table(("time", "status", "worker", "detail"), rows)

    @admin.display(description="checkpoint")
    def checkpoint_summary(self, run):
        checkpoint = run.checkpoint or {}
        if not checkpoint:
            return "— (cleared when a run ends)"
        steps = checkpoint.get("tool_steps", {})
        return format_html(
            "{} characters of text, {} of reasoning, {} tool steps, model history {}.<br>{}",
            len(checkpoint.get("text", "")), len(checkpoint.get("reasoning", "")), len(steps),
            "kept" if checkpoint.get("history") else "not yet", excerpt(checkpoint.get("text", ""), 300),
        )

    # Actions -----------------------------------------------------------------------------
    @admin.action(description="Recover now", permissions=["change"])
    def recover_now(self, request, queryset):
        run_each(self, request, queryset, lambda run: repair_services.recover_run_now(run=run, by=_who(request)),
                 verb="Recover now")

    recover_now.confirm = "Recover this run now? A worker still running it loses it."

    @admin.action(description="Cancel", permissions=["change"])
    def cancel_runs(self, request, queryset):
        run_each(self, request, queryset, lambda run: repair_services.cancel_run(run=run, by=_who(request)),
                 verb="Cancel")

    cancel_runs.confirm = "Cancel this run? The partial reply is kept as cancelled."

    @admin.action(description="Retry", permissions=["change"])
    def retry_runs(self, request, queryset):
        def retry(run):
            new = repair_services.retry_run(run=run, by=_who(request))
            return f"run {str(new.pk)[:8]} queued to answer again"

        run_each(self, request, queryset, retry, verb="Retry")

    retry_runs.confirm = "Answer this turn again? The old text is kept as a version of the reply."


class AgentAdminForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = ["owner", "name", "avatar", "description", "model", "base_url", "system_prompt", "settings",
                  "tools", "reply_policy", "recovery_policy"]

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
        (None, {"fields": ["owner", "name", "avatar", "description", "model", "base_url"]}),
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
                 r.created_at.strftime("%Y-%m-%d %H:%M:%S"), excerpt(r.error, 60))
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
        from agents_app import workers

        if worker.stopped_at is not None:
            return badge("stopped")
        silent = timezone.now() - worker.heartbeat_at > timedelta(seconds=workers.heartbeat_seconds() * 3)
        return badge("silent" if silent else "live")


@admin.register(Remote)
class RemoteAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "kind", "url", "status", "last_checked_at"]
    search_fields = ["name", "url", "owner__username"]
    list_select_related = ["owner"]
    # The headers are secret: never shown. Remotes are made by their owners on /agents/remotes/.
    exclude = ["headers"]
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
