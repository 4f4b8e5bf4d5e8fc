"""The admin of runs: find why a reply failed or stalled and put it right (recover, cancel, retry)."""

from datetime import timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from agents_app.models import Run
from agents_app.repair import selectors as repair_selectors
from agents_app.repair import services as repair_services
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
        if run.status in Run.LIVE:
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
        timeline = self.timeline_link(run)
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
