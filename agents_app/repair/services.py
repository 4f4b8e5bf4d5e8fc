"""Writes staff make to put turns right: recover now, cancel, retry, send again, and the fixes of
hub_repair. Each re-reads its run under a lock and raises Conflict when there is nothing to do.
"""

from django.db import transaction
from django.db.models import Q

from agents_app.models import Run
from agents_app.turns import recovery, runs
from chats import events
from chats import services as chat_services
from chats.models import Membership, Message
from chats.services.repairs import settle_stuck_reply, stuck_reply_text
from hub.errors import Conflict


def _locked(run: Run) -> Run:
    return Run.objects.select_for_update(of=("self",)).select_related("agent", "chat", "thread").get(pk=run.pk)


def _describe_continuation(continuation: Run | None, run: Run) -> str:
    if continuation is not None:
        return f"recovered; run {str(continuation.pk)[:8]} (attempt {continuation.attempt}) is queued to go on"
    run.refresh_from_db(fields=["status", "error"])
    if run.status == Run.Status.FAILED:
        return f"failed: {run.error}"
    return "recovered; the agent's recovery policy says not to go on"


@transaction.atomic
def recover_run_now(*, run: Run, by: str) -> str:
    """Recover a running run at once, even under a live lease (a hung worker loses it: every write
    it makes is fenced by the lease). A queued run is sent to the workers again.

    Returns what happened. Raises Conflict for a finished run.
    """
    run = _locked(run)
    if run.status == Run.Status.QUEUED:
        runs.dispatch_on_commit(run)
        return "was still queued: sent to the workers again"
    if run.status != Run.Status.RUNNING:
        raise Conflict(f"run {str(run.pk)[:8]} is {run.status}; only a running or queued run can be recovered")
    continuation = recovery.recover_run(run.pk, reason=f"recovered by {by}", token=run.lease_token)
    return _describe_continuation(continuation, run)


@transaction.atomic
def recover_lost_run(*, run: Run) -> str:
    """Recover a running run whose lease is dead (what the sweeper does), for hub_repair."""
    run = _locked(run)
    if run.status != Run.Status.RUNNING or not runs.lease_is_dead(run):
        raise Conflict(f"run {str(run.pk)[:8]} is no longer running past its lease")
    continuation = recovery.recover_run(run.pk, reason="repair: lease expired")
    return _describe_continuation(continuation, run)


@transaction.atomic
def cancel_run(*, run: Run, by: str) -> str:
    """Stop a run. Queued: cancelled at once. Running under a live lease: its worker is asked to
    stop (within a second) and keeps the partial reply as cancelled. Running with its worker gone:
    cancelled here, the partial reply kept as cancelled. Sends run.updated and message.settled.

    Raises Conflict for a finished run.
    """
    run = _locked(run)
    if run.status not in Run.LIVE:
        raise Conflict(f"run {str(run.pk)[:8]} is already {run.status}")
    if run.status == Run.Status.QUEUED or not runs.lease_is_dead(run):
        was_queued = run.status == Run.Status.QUEUED
        runs.request_cancel(run)
        return "cancelled" if was_queued else "asked its worker to stop; the partial reply is kept as cancelled"
    runs.mark_cancelled(run, reason=f"cancelled by {by}; its worker was gone")
    kept = 0
    message = Message.objects.filter(pk=run.reply_message_id).first() if run.reply_message_id else None
    if message is not None and message.status == Message.Status.STREAMING:
        parts = stuck_reply_text(message)
        chat_services.settle_reply(message=message, status=Message.Status.CANCELLED, content=parts["text"],
                                   reasoning=parts["reasoning"])
        kept = len(parts["text"])
    events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_updated(run))
    return f"cancelled (its worker was gone); {kept} characters of the reply kept"


@transaction.atomic
def retry_run(*, run: Run, by: str) -> Run:
    """Answer a failed or cancelled turn again: a new run (attempt 1, continuing this one) streams
    a fresh answer into the same reply message; the old text is kept in the reply's versions.

    Raises Conflict when the run is not the last of its turn, not failed or cancelled, delegated
    (retry its parent), or when its chat, agent or question is gone.
    """
    run = _locked(run)
    if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
        raise Conflict(f"run {str(run.pk)[:8]} is {run.status}; only a failed or cancelled run can be retried")
    later = Run.objects.filter(continues=run).order_by("-created_at").first()
    if later is not None:
        raise Conflict(f"run {str(run.pk)[:8]} was already followed by run {str(later.pk)[:8]}")
    if run.parent_id is not None:
        raise Conflict("a delegated run is retried with its parent run")
    if run.chat.deleted_at is not None:
        raise Conflict("its chat is in the trash; restore it first")
    if run.agent.deleted_at is not None:
        raise Conflict(f"its agent {run.agent.name} was deleted")
    if run.trigger_message_id is None:
        raise Conflict("the message it answered is gone")
    message = None
    if run.reply_message_id:
        message = Message.objects.select_for_update(of=("self",)).get(pk=run.reply_message_id)
        if message.status == Message.Status.STREAMING:
            raise Conflict(f"its reply {message.pk} is still streaming")
        if message.content:
            # Kept in memory here; resume_reply below saves data with the reply's new state.
            versions = [*message.data.get("versions", []), {"content": message.content, "run_id": str(run.pk)}]
            message.data = {**message.data, "versions": versions}
    kind = Run.Kind.REPLY if run.kind == Run.Kind.CONTINUE else run.kind
    retry = runs.create_run(
        agent=run.agent, chat=run.chat, thread=run.thread, trigger_message=run.trigger_message, kind=kind,
        continues=run, reply_message=message, note=f"retry of run {str(run.pk)[:8]} by {by}",
    )
    if message is not None:
        # The reply shows as streaming again at once, owned by the new run.
        chat_services.resume_reply(message=message, run=retry, content="")
    return retry


@transaction.atomic
def send_again(*, run: Run) -> str:
    """Send a queued run's task to the workers (again); a duplicate is harmless (claim is CAS)."""
    run = _locked(run)
    if run.status != Run.Status.QUEUED:
        raise Conflict(f"run {str(run.pk)[:8]} is {run.status}, no longer queued")
    runs.dispatch_on_commit(run)
    return "sent to the workers"


def live_run_exists(message: Message) -> bool:
    """Whether a queued or running run will still write this reply."""
    return Run.objects.filter(Q(pk=message.run_id) | Q(reply_message=message), status__in=Run.LIVE).exists()


def settle_stuck_message(*, message: Message) -> str:
    """Settle a streaming reply that no live run will finish, as interrupted (text kept)."""
    settled = settle_stuck_reply(message=message, live_run_exists=live_run_exists)
    return f"settled as interrupted; {len(settled.content)} characters kept"


@transaction.atomic
def remove_deleted_agent_membership(*, membership: Membership) -> str:
    """Take a deleted agent out of a chat it is still a member of."""
    membership = Membership.objects.select_related("chat", "agent").filter(pk=membership.pk).first()
    if membership is None:
        raise Conflict("that membership is already gone")
    if membership.agent.deleted_at is None:
        raise Conflict(f"{membership.agent.name} is not deleted")
    chat_services.remove_member(chat=membership.chat, agent=membership.agent)
    return f"removed {membership.agent.name} from the chat"
