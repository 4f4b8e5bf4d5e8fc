"""Reads for staff: what hub_repair finds broken in turns, and the timeline of one turn."""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from agents_app import health
from agents_app.models import Run
from agents_app.turns import runs
from chats.models import Membership, Message
from hub.repair import Finding


def run_label(run: Run) -> str:
    return f"run {str(run.pk)[:8]} ({run.kind}, {run.agent.name} in {run.chat.title!r})"


def _ago(moment) -> str:
    seconds = max(0, int((timezone.now() - moment).total_seconds()))
    if seconds < 90:
        return f"{seconds} s ago"
    if seconds < 5400:
        return f"{seconds // 60} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def _run_url(run) -> str:
    return reverse("admin:agents_app_run_change", args=[run.pk])


def find_expired_leases() -> list[Finding]:
    """Runs still `running` whose lease ran out (or whose worker process on this host is gone)."""
    now = timezone.now()
    findings = []
    for run in Run.objects.filter(status=Run.Status.RUNNING).select_related("agent", "chat").order_by("created_at"):
        if not runs.lease_is_dead(run, now=now):
            continue
        if run.lease_expires_at is not None and run.lease_expires_at <= now:
            problem = f"running, but its lease ran out {_ago(run.lease_expires_at)} (worker {run.lease_owner})"
        else:
            problem = f"running, but its worker process ({run.lease_owner}) is gone"
        findings.append(Finding(
            check="expired_leases", subject=run_label(run), problem=problem, target=run, url=_run_url(run),
            remedy="recover it: keep the partial reply and go on as the agent's recovery policy says",
        ))
    return findings


def find_undispatched_runs() -> list[Finding]:
    """Queued runs whose task was never sent (the process that queued them stopped first).

    A run is sent on commit, so one younger than a lease may just be on its way.
    """
    cutoff = timezone.now() - timedelta(seconds=settings.HUB_LEASE_SECONDS)
    stale = Run.objects.filter(status=Run.Status.QUEUED, dispatched_at__isnull=True, created_at__lt=cutoff)
    return [
        Finding(check="undispatched_runs", subject=run_label(run),
                problem=f"queued {_ago(run.created_at)} and never sent to a worker",
                remedy="send it to the workers", target=run, url=_run_url(run))
        for run in stale.select_related("agent", "chat").order_by("created_at")
    ]


def find_no_live_worker() -> list[Finding]:
    """No worker is alive while runs wait for one (queued or running), or after one went silent
    (killed, its host down). Workers that all stopped cleanly with nothing to do are a hub shut
    down on purpose, not a problem."""
    states = health.worker_states()
    problem = health.no_live_worker_problem(states)
    if problem is None:
        return []
    pending = Run.objects.filter(status__in=Run.LIVE).exists()
    if not pending and not any(s.state == "silent" for s in states):
        return []
    return [Finding(check="no_live_worker", subject="workers",
                    problem=problem.removesuffix(" " + health.START_A_WORKER),
                    remedy="start a worker: `celery -A hub worker` (or `make run` in embedded mode)",
                    url=reverse("admin-health"))]


def find_waiting_runs() -> list[Finding]:
    """Runs queued longer than HUB_QUEUED_WARNING_SECONDS: one finding for the queue (its cause is
    the workers', not the runs'), naming the oldest."""
    queue = health.run_queue()
    states = health.worker_states()
    problem = health.waiting_runs_problem(queue, states)
    if problem is None:
        return []
    live = any(s.state == "live" for s in states)
    remedy = ("start a worker: `celery -A hub worker`; it takes the runs in order, nothing is lost" if not live
              else "see Health: add workers if they are busy, or check they read the hub's queue")
    return [Finding(check="waiting_runs", subject=f"the queue (oldest: {run_label(queue.oldest_queued)})",
                    problem=problem.removesuffix(" " + health.START_A_WORKER), remedy=remedy,
                    target=queue.oldest_queued, url=_run_url(queue.oldest_queued))]


def stuck_streams():
    """Messages shown as streaming that no queued or running run will finish."""
    live = Run.objects.filter(Q(pk=OuterRef("run_id")) | Q(reply_message=OuterRef("pk")), status__in=Run.LIVE)
    return Message.objects.filter(status=Message.Status.STREAMING).filter(~Exists(live))


def find_stuck_streams() -> list[Finding]:
    findings = []
    for message in stuck_streams().select_related("chat", "sender_agent", "run").order_by("id"):
        run = message.run
        why = f"its run {str(run.pk)[:8]} is {run.status}" if run is not None else "it has no run"
        sender = message.sender_agent.name if message.sender_agent_id else "user"
        findings.append(Finding(
            check="stuck_streams",
            subject=f"message {message.pk} ({sender} in {message.chat.title!r})",
            problem=f"streaming since {_ago(message.created_at)}, but {why}",
            remedy="settle it as interrupted, keeping its text", target=message,
            url=reverse("admin:chats_message_change", args=[message.pk]),
        ))
    return findings


def find_deleted_agent_memberships() -> list[Finding]:
    rows = Membership.objects.filter(agent__deleted_at__isnull=False).select_related("chat", "agent")
    return [
        Finding(check="deleted_agent_memberships", subject=f"{m.agent.name} in {m.chat.title!r}",
                problem=f"the agent was deleted {_ago(m.agent.deleted_at)} but is still a member",
                remedy="remove it from the chat", target=m,
                url=reverse("admin:chats_membership_change", args=[m.pk]))
        for m in rows.order_by("id")
    ]


# --- The timeline of a turn ------------------------------------------------------------------

def turn_chain(run: Run) -> list[Run]:
    """Every run of the turn this run belongs to, first to last (recoveries, continuations, retries)."""
    first = Run.objects.select_related("agent", "chat").get(pk=run.pk)
    seen = {run.pk}
    while first.continues_id and first.continues_id not in seen:
        seen.add(first.continues_id)
        first = Run.objects.select_related("agent", "chat").get(pk=first.continues_id)
    return runs.runs_from(first.pk, rows=Run.objects.select_related("agent", "chat"))


@dataclass
class TimelineEvent:
    at: datetime | None
    run: Run
    what: str  # queued, running, succeeded, …, tool, continued
    worker: str = ""
    detail: str = ""
    result: object = None
    link: str = ""


@dataclass
class Timeline:
    run: Run
    chain: list[Run]
    events: list[TimelineEvent] = field(default_factory=list)
    children: list[Run] = field(default_factory=list)

    @property
    def started(self):
        """The first moment of the turn (its first history entry; a row's own time is a hair later)."""
        times = [e.at for e in self.events if e.at is not None]
        return min(times) if times else self.chain[0].created_at

    def offset(self, event: TimelineEvent) -> str:
        if event.at is None:
            return ""
        return f"+{(event.at - self.started).total_seconds():.2f} s"


def _parse(at) -> datetime | None:
    try:
        return datetime.fromisoformat(at) if at else None
    except (TypeError, ValueError):
        return None


def run_timeline(run: Run) -> Timeline:
    """Every state change of every run of the turn (with its time and worker), each recovery and
    continuation, and the tool steps with their results, in time order."""
    chain = turn_chain(run)
    timeline = Timeline(run=run, chain=chain)
    events = timeline.events
    for index, item in enumerate(chain):
        for entry in item.history or []:
            detail = entry.get("error") or entry.get("reason") or ""
            if entry.get("status") == Run.Status.QUEUED and entry.get("kind"):
                detail = f"{entry['kind']}, attempt {item.attempt}" + (f"; {detail}" if detail else "")
            events.append(TimelineEvent(at=_parse(entry.get("at")), run=item, what=entry.get("status", "?"),
                                        worker=entry.get("worker", ""), detail=detail))
        if index + 1 < len(chain):
            nxt = chain[index + 1]
            queued_at = _parse((nxt.history or [{}])[0].get("at")) or nxt.created_at
            events.append(TimelineEvent(at=queued_at, run=item, what="continued",
                                        detail=f"by run {str(nxt.pk)[:8]} ({nxt.kind}, attempt {nxt.attempt})",
                                        link=reverse("admin:agents_app_run_change", args=[nxt.pk])))
    reply_ids = {r.reply_message_id for r in chain if r.reply_message_id}
    steps = Message.objects.filter(reply_to_id__in=reply_ids, kind=Message.Kind.LOG, subkind="tool").order_by("id")
    for step in steps:
        owner = _run_at(chain, step.created_at)
        data = step.data or {}
        events.append(TimelineEvent(
            at=step.created_at, run=owner, what="tool",
            detail=f"{data.get('name', '?')}({json.dumps(data.get('args', {}), ensure_ascii=False)})",
            result=data.get("result"), link=reverse("admin:chats_message_change", args=[step.pk]),
        ))
    events.sort(key=lambda e: (e.at is None, e.at or timezone.now()))
    timeline.children = list(Run.objects.filter(parent__in=chain).select_related("agent").order_by("created_at"))
    return timeline


def _run_at(chain: list[Run], moment) -> Run:
    """The run of the chain that was going at that moment (tool steps carry no run of their own)."""
    owner = chain[0]
    for item in chain:
        if (item.started_at or item.created_at) <= moment:
            owner = item
    return owner
