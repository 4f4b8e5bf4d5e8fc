"""Recovery of turns whose worker died or stalled, and the sweeper that finds them.

A lost run becomes `recovered` (its checkpoint moves to its continuation) and, unless the agent's
hook says otherwise, a continuation run is queued that streams on into the same reply message.
A turn that had produced nothing is simply retried. After HUB_MAX_RECOVERIES recoveries the turn
fails with a reason on the message and a run.exhausted event.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from agents_app import hooks
from agents_app.models import Run
from agents_app.turns import runs
from chats import events
from chats import services as chat_services
from chats.models import Message
from chats.streams import furthest_parts, replay_buffer

log = logging.getLogger(__name__)


def _partial(run: Run) -> dict:
    """What the lost turn had produced: the checkpoint, or the replay buffer when it got further."""
    checkpoint = run.checkpoint or {}
    parts = {"text": checkpoint.get("text", ""), "reasoning": checkpoint.get("reasoning", "")}
    return furthest_parts(run.reply_message_id, parts) if run.reply_message_id else parts


def _produced_nothing(parts: dict, checkpoint: dict) -> bool:
    return not parts["text"] and not parts["reasoning"] and not checkpoint.get("tool_steps")


def recover_run(run_id, *, reason: str, token=None, owner_gone: str | None = None) -> Run | None:
    """Recover one lost run; returns the continuation queued, if any.

    Without token: only a running run whose lease is dead is touched, or, with owner_gone (a
    process agents_app.turns.peers found gone, "host:pid"), one that process still holds. With token:
    the worker holding that lease gives its own run up (the stall watchdog).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("agent", "chat", "thread").filter(
            pk=run_id
        ).first()
        if run is None or run.status != Run.Status.RUNNING:
            return None
        if token is not None and run.lease_token != token:
            return None
        held_by_the_gone = owner_gone is not None and run.lease_owner.startswith(owner_gone + ":")
        if token is None and not held_by_the_gone and not runs.lease_is_dead(run):
            return None
        return _recover_locked(run, reason=reason)


def _recover_locked(run: Run, *, reason: str) -> Run | None:
    parts = _partial(run)
    checkpoint = dict(run.checkpoint or {})
    # The tokens of the lost run's requests that finished: the run records them as it ends
    # (runs._end_without_lease) and the reply adds them; its continuation starts counting afresh.
    spent = checkpoint.pop("usage", None) or None
    message = Message.objects.filter(pk=run.reply_message_id).first() if run.reply_message_id else None
    ctx = hooks.RecoveryContext(
        run=run, partial_text=parts["text"], partial_parts={**parts, "tool_steps": checkpoint.get("tool_steps", {})},
        attempt=run.attempt, reason=reason,
    )
    agent_hooks = hooks.hooks_for(run.agent)

    if run.attempt > settings.HUB_MAX_RECOVERIES:
        return _exhaust(run, message=message, parts=parts, hooks_=agent_hooks, ctx=ctx, spent=spent)

    decision = agent_hooks.on_recovery(ctx)
    runs.mark_recovered(run, reason=reason)
    log.info("recovered run %s (attempt %s, %s)", run.pk, run.attempt, reason)
    events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_updated(run))

    keep = decision.persist and not _produced_nothing(parts, checkpoint)
    if message is not None:
        _leave_reply(message, parts=parts if keep else {}, continuing=decision.continue_ and not keep, spent=spent)
    if not decision.continue_:
        return None
    if not keep:
        # Start the turn again from the unanswered message, into the same (emptied) reply. Tool
        # steps that finished are kept: a model that asks for the same call gets its result again.
        steps = checkpoint.get("tool_steps")
        return runs.create_run(
            agent=run.agent, chat=run.chat, thread=run.thread, trigger_message=run.trigger_message,
            kind=run.kind, parent=run.parent, continues=run, reply_message=message, attempt=run.attempt + 1,
            checkpoint={"tool_steps": steps} if steps else None, parent_tool_call_id=run.parent_tool_call_id,
        )
    continuation_checkpoint = {**checkpoint, "text": parts["text"], "reasoning": parts["reasoning"]}
    return runs.create_run(
        agent=run.agent, chat=run.chat, thread=run.thread, trigger_message=run.trigger_message,
        kind=Run.Kind.CONTINUE, parent=run.parent, continues=run, reply_message=message, attempt=run.attempt + 1,
        checkpoint=continuation_checkpoint, parent_tool_call_id=run.parent_tool_call_id,
    )


def _leave_reply(message: Message, *, parts: dict, continuing: bool, spent: dict | None) -> None:
    """The reply as recovery leaves it: the kept partial text (or none, when the hook dropped it),
    `interrupted`; or emptied and `streaming` for a turn started again into it. Either way it
    counts the tokens the lost run spent (spent)."""
    if continuing:
        chat_services.resume_reply(message=message, run=None, content="", usage=spent)
    else:
        chat_services.settle_reply(message=message, status=Message.Status.INTERRUPTED,
                                   content=parts.get("text", ""), reasoning=parts.get("reasoning", ""), usage=spent)
    replay_buffer().reset(message.pk, parts)


def _exhaust(run: Run, *, message, parts, hooks_, ctx, spent: dict | None) -> None:
    error = (
        f"This reply was interrupted {run.attempt} times and Hub stopped retrying it. "
        "What had been written is kept; you can ask again."
    )
    runs.mark_failed(run, error=error)
    if message is not None:
        chat_services.settle_reply(
            message=message, status=Message.Status.ERROR, content=parts["text"], reasoning=parts["reasoning"],
            error=error, usage=spent,
        )
        replay_buffer().reset(message.pk, parts)
    events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_updated(run))
    events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_exhausted(run))
    transaction.on_commit(lambda: hooks_.on_exhausted(ctx))
    log.warning("run %s failed after %s attempts", run.pk, run.attempt)


def sweep(*, resend_queued_older_than: float | None = None) -> dict:
    """Recover every running run whose lease is dead; re-send queued runs that were never taken.

    Run by beat every HUB_SWEEP_SECONDS and by every worker when it starts. Safe to run anywhere,
    any number of times at once: recovery takes the row lock and re-checks the lease.
    """
    now = timezone.now()
    recovered = 0
    candidates = Run.objects.filter(status=Run.Status.RUNNING).only("id", "lease_expires_at", "lease_owner")
    for run in candidates:
        if runs.lease_is_dead(run, now=now):
            recover_run(run.pk, reason="worker lost")
            recovered += 1
    age = resend_queued_older_than
    if age is None:
        age = 0 if broker_lost_its_messages() else settings.HUB_LEASE_SECONDS * 2
    # Runs whose task could not be sent at all (the broker was away) go again after a sweep or two.
    never_sent = Q(dispatched_at__isnull=True, created_at__lt=now - timedelta(seconds=settings.HUB_SWEEP_SECONDS))
    stale = Run.objects.filter(Q(created_at__lt=now - timedelta(seconds=age)) | never_sent,
                               status=Run.Status.QUEUED)
    resent = 0
    for run in stale.only("id"):
        # A duplicate of a task still in the broker is harmless: claiming is compare-and-set.
        runs.dispatch_on_commit(run)
        resent += 1
    return {"recovered": recovered, "resent": resent}


def sweep_everywhere(**options) -> dict:
    """sweep() in the database and in each temporary chat (chats.temporary), whose runs live in
    the chat's own image. The counts are added up."""
    from chats.temporary import chats as temporary_chats
    from chats.temporary.images import ChatGone

    total = {"recovered": 0, "resent": 0}
    for place in temporary_chats.every_place():
        try:
            with place:
                counts = sweep(**options)
        except ChatGone:
            continue  # expired since it was listed
        total = {key: total[key] + counts[key] for key in total}
    return total


BROKER_MARK = "hub:broker-mark"


def broker_lost_its_messages() -> bool:
    """Whether Redis lost its keys since the last sweep (a restart without persistence): the task
    messages of queued runs went with them, and those runs are re-sent at once, not after the
    usual wait. The cache lives in the broker's Redis (REDIS_URL), so a missing mark says so."""
    return cache.add(BROKER_MARK, 1, timeout=None)


def running_run_ids() -> list:
    return list(Run.objects.filter(status=Run.Status.RUNNING).values_list("id", flat=True))


def recover_if_lost(run_ids) -> int:
    """Recover those of these runs whose lease is dead by now; from a thread of its own."""
    try:
        return sum(recover_run(run_id, reason="worker lost") is not None for run_id in run_ids)
    finally:
        connections.close_all()  # this thread's own connections
