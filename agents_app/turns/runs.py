"""The run state machine: the only code that changes a Run's status.

    queued ──claim──▶ running ──finish──▶ succeeded | failed | cancelled
                        │
                        └─(lease expired: recovery)──▶ recovered (+ a continuation run, queued)
                                                   └──▶ failed (recoveries exhausted)

Every write a worker makes while running is fenced by its lease token: an UPDATE … WHERE
lease_token = mine. A worker that lost its lease (it stalled, and recovery took over) writes
nothing more. Terminal states never change; an illegal transition raises IllegalTransition.

A write that fails because the database went away is tried again on a fresh connection for as
long as the caller can be sure it still holds its lease (retry_until).
"""

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import timedelta

import psycopg
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from agents_app.models import Run
from agents_app.usage import temporary as temporary_usage
from chats import events
from hub.celery import app

log = logging.getLogger(__name__)

TERMINAL = {s.value for s in Run.TERMINAL}
ALLOWED = {
    Run.Status.QUEUED: {Run.Status.RUNNING, Run.Status.CANCELLED, Run.Status.FAILED},
    Run.Status.RUNNING: {Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.RECOVERED},
}


class IllegalTransition(Exception):
    pass


def check_transition(current: str, new: str) -> None:
    if new not in ALLOWED.get(current, set()):
        raise IllegalTransition(f"a run cannot go from {current} to {new}")


def worker_identity() -> str:
    """host:pid:thread — enough for the sweeper to tell a dead local owner from a live one. The
    thread is the operating system's id, as `top -H` and /proc/<pid>/task show it."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()}"


def lease_seconds() -> int:
    return settings.HUB_LEASE_SECONDS


# --- Writes that outlive a database restart -------------------------------------------------
# The errors of a database that went away (a restart, a failover, a cut connection, SQLite busy
# past its timeout): the same write may succeed on a fresh connection. Django wraps the driver's
# errors in its own; psycopg's are listed for any that reach us unwrapped.
CONNECTION_ERRORS = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)
RETRY_FIRST_PAUSE = 0.05
RETRY_LONGEST_PAUSE = 0.5


class DatabaseLost(Exception):
    """The database stayed out of reach until the caller's deadline (the lease it surely holds)."""


def retry_until(deadline: float, write, *args, **kwargs):
    """write(*args, **kwargs), tried again on a fresh connection while the database is out of reach.

    The pause between tries doubles from RETRY_FIRST_PAUSE to RETRY_LONGEST_PAUSE, and the last
    try is made at deadline (time.monotonic()); if that fails too, raises DatabaseLost. Only for a
    write that may be repeated: fenced, idempotent, or a whole transaction of its own. Inside a
    transaction there is nothing to retry (the transaction is gone): the error goes to its owner.
    """
    pause = RETRY_FIRST_PAUSE
    failures = 0
    while True:
        try:
            result = write(*args, **kwargs)
        except CONNECTION_ERRORS as exc:
            if connection.in_atomic_block:
                raise
            failures += 1
            if failures == 1:
                log.warning("the database is out of reach (%s); trying again", exc)
            with contextlib.suppress(*CONNECTION_ERRORS):
                connection.close()  # a broken connection stays broken: the next try opens a new one
            left = deadline - time.monotonic()
            if left <= 0:
                raise DatabaseLost(f"no database for {failures} tries") from exc
            time.sleep(min(pause, left))
            pause = min(pause * 2, RETRY_LONGEST_PAUSE)
            continue
        if failures:
            log.warning("the database answered again after %s failed tries", failures)
        return result


def _history_entry(status: str, **extra) -> dict:
    return {"at": timezone.now().isoformat(), "status": status, "worker": worker_identity(), **extra}


def _history_plus(entry: dict) -> RawSQL:
    """The run's history with entry appended, computed by the database inside the UPDATE that
    changes the status: one statement, where reading the list under a lock and writing it back
    took three (claims and finishes are the start and the end of every turn)."""
    appended = {"postgresql": "history || jsonb_build_array(%s::jsonb)",
                "sqlite": "json_insert(history, '$[#]', json(%s))"}
    return RawSQL(appended[connection.vendor], (json.dumps(entry),))


def _broker_errors() -> tuple:
    import kombu.exceptions
    import redis.exceptions

    return (kombu.exceptions.OperationalError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            ConnectionError)


BROKER_ERRORS = _broker_errors()


# The turn's Celery task (agents_app.turns.tasks.run_turn) is sent by its name: the tasks sit
# above this module and call down into it, never the reverse. The name is the one queued messages
# carry, so it never changes; ignore_result as the task itself has it, so the message is the same.
RUN_TURN_TASK = "agents_app.run_turn"


def send_turn_task(run_id: str) -> None:
    app.send_task(RUN_TURN_TASK, args=[run_id], ignore_result=True)


def dispatch_on_commit(run: Run) -> None:
    """Send the run's Celery task once the transaction that created it commits, after its events
    (the tab hears of the question and the queued run before a worker can answer)."""

    def send():
        try:
            send_turn_task(str(run.pk))
        except BROKER_ERRORS as exc:
            # The run is stored and stays queued: the sweeper sends it again once the broker is
            # back (recovery.sweep, runs never sent). The user's message is not lost, so the
            # request that stored it still succeeds.
            log.warning("run %s stays queued: its task could not be sent (%s)", run.pk, exc)
            return
        Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())

    events.after_broadcasts(send)


def create_run(*, agent, chat, thread, trigger_message=None, kind=Run.Kind.REPLY, parent=None, continues=None,
               reply_message=None, attempt: int = 1, checkpoint: dict | None = None,
               parent_tool_call_id: str = "", note: str = "") -> Run:
    """Store a queued run and send its task on commit. Call inside the triggering transaction.

    note (e.g. "retried by staff") goes into the run's first history entry.
    """
    queued = _history_entry(Run.Status.QUEUED, kind=kind, **({"reason": note} if note else {}))
    run = Run.objects.create(
        agent=agent, chat=chat, thread=thread, trigger_message=trigger_message, kind=kind, parent=parent,
        continues=continues, reply_message=reply_message, attempt=attempt, checkpoint=checkpoint or {},
        parent_tool_call_id=parent_tool_call_id, history=[queued], owner_id=chat.owner_id,
    )
    dispatch_on_commit(run)
    events.broadcast_on_commit(events.chat_group(chat.pk), events.run_updated(run))
    return run


def runs_from(run_id, *, rows=None) -> list[Run]:
    """This run and every run that continued it (recovery, continuation, retry), oldest first.

    rows is the queryset to read them with (select_related, say).
    """
    rows = Run.objects.all() if rows is None else rows
    chain = [rows.get(pk=run_id)]
    while (following := rows.filter(continues=chain[-1]).order_by("created_at").first()) is not None:
        if any(run.pk == following.pk for run in chain):
            break  # a loop would be a broken row; stop rather than spin
        chain.append(following)
    return chain


def latest_in_chain(run: Run) -> Run:
    """The newest run of a turn, read afresh."""
    return runs_from(run.pk)[-1]


def claim(run_id) -> uuid.UUID | None:
    """Take a queued run: one compare-and-set. Returns the new lease token, or None if not queued."""
    token = uuid.uuid4()
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, cancel_requested=False).update(
        status=Run.Status.RUNNING,
        lease_token=token,
        lease_owner=worker_identity(),
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        started_at=now,
        heartbeat_at=now,
        history=_history_plus(_history_entry(Run.Status.RUNNING)),
    )
    return token if claimed else None


def _fenced(run_id, token):
    return Run.objects.filter(pk=run_id, lease_token=token, status=Run.Status.RUNNING)


def heartbeat(run_id, token) -> bool:
    """Extend the lease; False means the lease is lost and the worker must stop writing."""
    now = timezone.now()
    return bool(
        _fenced(run_id, token).update(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_seconds()))
    )


def _count_fields(counts: dict | None) -> dict:
    """The worker's in-memory delta and checkpoint counts, stored with a checkpoint or the finish."""
    if not counts:
        return {}
    return {"delta_count": counts.get("deltas", 0), "checkpoint_count": counts.get("checkpoints", 0)}


# SQL of its own: a checkpoint is written four times a second per stream, and the ORM spent about
# a millisecond of CPU building each update, which a hundred streams in one worker could not
# afford. The stored tool steps are merged in by the database itself: the exactly-once tool
# wrapper writes them (under the row lock) while the turn checkpoints, and a read-then-write here
# would need the lock too. A checkpoint does not extend the lease (the heartbeat does, every third
# of it): the lease's expiry is indexed, and an update that leaves indexed columns alone can be
# written in place (a HOT update), without a new entry in each of the table's eleven indexes.
_RUN_CHECKPOINT = {
    "postgresql": """
        UPDATE agents_app_run SET
            checkpoint = %s::jsonb || jsonb_build_object('tool_steps', COALESCE(checkpoint->'tool_steps', '{}'::jsonb)),
            heartbeat_at = %s,
            delta_count = COALESCE(%s::integer, delta_count), checkpoint_count = COALESCE(%s::integer, checkpoint_count)
        WHERE id = %s AND lease_token = %s AND status = 'running'""",
    "sqlite": """
        UPDATE agents_app_run SET
            checkpoint = json_set(%s, '$.tool_steps', json(COALESCE(json_extract(checkpoint, '$.tool_steps'), '{}'))),
            heartbeat_at = %s,
            delta_count = COALESCE(%s, delta_count), checkpoint_count = COALESCE(%s, checkpoint_count)
        WHERE id = %s AND lease_token = %s AND status = 'running'""",
}
# On PostgreSQL the reply's text goes with the run in one statement (the reply is written only if
# the run's fenced update was): one round trip and one commit where there were four.
_RUN_AND_REPLY_CHECKPOINT = f"""
    WITH run AS ({_RUN_CHECKPOINT["postgresql"]} RETURNING id),
    reply AS (
        UPDATE chats_message SET content = %s, data = %s::jsonb
        WHERE id = %s AND status = 'streaming' AND EXISTS (SELECT 1 FROM run)
    )
    SELECT count(*) FROM run"""


def _db_value(field_name: str, value):
    return Run._meta.get_field(field_name).get_db_prep_value(value, connection)


def save_checkpoint(run_id, token, checkpoint: dict, *, counts: dict | None = None, reply=None) -> bool:
    """Write the checkpoint under the lease, keeping the tool steps stored.

    False if the lease is lost. counts are the turn's delta and checkpoint counts (kept as they
    were when not given). reply, (message id, content, reasoning, data), is the streaming reply's
    text, stored with the checkpoint when the lease holds.
    """
    counted = _count_fields(counts)  # None keeps the stored count
    run_values = [json.dumps(checkpoint), _db_value("heartbeat_at", timezone.now()),
                  counted.get("delta_count"), counted.get("checkpoint_count"),
                  _db_value("id", run_id), _db_value("lease_token", token)]
    if reply is not None and connection.vendor == "postgresql":
        message_id, content, reasoning, data = reply
        with connection.cursor() as cursor:
            cursor.execute(_RUN_AND_REPLY_CHECKPOINT,
                           [*run_values, content, json.dumps({**data, "reasoning": reasoning}), message_id])
            return cursor.fetchone()[0] == 1
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_RUN_CHECKPOINT[connection.vendor], run_values)
            saved = cursor.rowcount == 1
        if saved and reply is not None:
            from chats.services import save_reply_progress

            message_id, content, reasoning, data = reply
            save_reply_progress(message_id=message_id, content=content, reasoning=reasoning, data=data)
    return saved


def finish(run_id, token, status: str, *, error: str = "", usage: dict | None = None,
           counts: dict | None = None, counted: bool = True) -> bool:
    """End a running run under its lease. The checkpoint is cleared. False if the lease is lost.

    usage ({model, input_tokens, output_tokens, requests}, as the provider reported them) goes into
    the run's usage and, when counted (not a built-in agent's estimate: providers.spends_tokens),
    its token columns, in the same statement.
    """
    check_transition(Run.Status.RUNNING, status)
    usage = usage or {}
    done = _fenced(run_id, token).update(
        status=status, error=error, usage=usage, **_usage_columns(usage if counted else {}),
        checkpoint={}, finished_at=timezone.now(),
        lease_expires_at=None, history=_history_plus(_history_entry(status, **({"error": error} if error else {}))),
        **_count_fields(counts),
    )
    return bool(done)


def _token_count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _usage_columns(usage: dict) -> dict:
    """The run's model and token columns from a usage as the provider reported it."""
    return {"model": str(usage.get("model") or "")[:200], "input_tokens": _token_count(usage.get("input_tokens")),
            "output_tokens": _token_count(usage.get("output_tokens"))}


def _end_without_lease(run: Run, status: str, *, error: str = "", **history_fields) -> None:
    """End a run that no worker holds (the caller holds the row lock); the checkpoint is cleared.

    The tokens its checkpoint counted (its requests that finished) are recorded as its usage.
    """
    check_transition(run.status, status)
    spent = (run.checkpoint or {}).get("usage") or {}
    run.status = status
    run.checkpoint = {}
    run.finished_at = timezone.now()
    run.lease_expires_at = None
    fields = ["status", "checkpoint", "finished_at", "lease_expires_at", "history"]
    if spent and isinstance(spent, dict) and temporary_usage.in_temporary_chat():
        run.usage = spent
        fields.append("usage")
        temporary_usage.record(run=run, usage=spent)
    elif spent and isinstance(spent, dict):
        run.usage = spent
        columns = _usage_columns(spent)
        for name, value in columns.items():
            setattr(run, name, value)
        fields += ["usage", *columns]
    if error:
        run.error = error
        fields.append("error")
        history_fields["error"] = error
    run.history = [*run.history, _history_entry(status, **history_fields)]
    run.save(update_fields=fields)


def mark_recovered(run: Run, *, reason: str) -> None:
    """running → recovered, for recovery only."""
    _end_without_lease(run, Run.Status.RECOVERED, reason=reason)


def mark_failed(run: Run, *, error: str) -> None:
    """queued/running → failed without a lease (recovery exhausted, or never runnable)."""
    _end_without_lease(run, Run.Status.FAILED, error=error)


def mark_cancelled(run: Run, *, reason: str) -> None:
    """running → cancelled without a lease: staff ending a run whose worker is gone."""
    _end_without_lease(run, Run.Status.CANCELLED, reason=reason)


# --- Live cancel ----------------------------------------------------------------------------
# Cancel is a flag in the cache (Redis in production): live only. A restart, or a continuation
# (a new run id), does not see it, exactly as the design says.

def _cancel_key(run_id) -> str:
    return f"hub:cancel:{run_id}"


def request_cancel(run: Run) -> bool:
    """Ask a queued or running run to stop. Returns False for a finished run."""
    if run.status in TERMINAL:
        return False
    cache.set(_cancel_key(run.pk), 1, timeout=lease_seconds() * 10)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    if run.status == Run.Status.QUEUED:
        with transaction.atomic():
            queued = Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.QUEUED).first()
            if queued is not None:
                _end_without_lease(queued, Run.Status.CANCELLED)
                run.status = queued.status
                # A queued run never reaches a worker: tell the chat's tabs here instead.
                events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_updated(queued))
    return True


def cancelled_among(run_ids) -> set:
    """Those of these runs asked to stop, in one cache round trip."""
    keys = {_cancel_key(run_id): run_id for run_id in run_ids}
    return {keys[key] for key, value in cache.get_many(list(keys)).items() if value}


def lease_is_dead(run: Run, *, now=None) -> bool:
    """The lease expired, or its owner is a process on this host that no longer exists."""
    now = now or timezone.now()
    if run.lease_expires_at is None or run.lease_expires_at <= now:
        return True
    host, _, rest = (run.lease_owner or "").partition(":")
    pid = rest.split(":", 1)[0]
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
    return False
