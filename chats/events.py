"""Every event that goes to browsers: names, payloads and groups. Only services call these.

All payloads are JSON-safe dicts of the shape {"type": "<noun>.<verb>", ...}. The channel layer
is at-most-once, so events carry ids and offsets that let a client notice a gap and refetch.
"""

import asyncio
import contextlib
import logging
import os
import threading
from datetime import timedelta

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats.temporary import chats as temporary_chats

log = logging.getLogger(__name__)

MESSAGE_CREATED = "message.created"
MESSAGE_EDITED = "message.edited"
MESSAGE_DELTA = "message.delta"
MESSAGE_SETTLED = "message.settled"
RUN_UPDATED = "run.updated"
RUN_EXHAUSTED = "run.exhausted"
THREAD_CREATED = "thread.created"
CHAT_UPDATED = "chat.updated"
CHAT_DELETED = "chat.deleted"
CHAT_SAVED = "chat.saved"
DIRECTORY_UPDATED = "directory.updated"
MEMORY_UPDATED = "memory.updated"
FILE_UPDATED = "file.updated"
SHARE_UPDATED = "share.updated"
FOLDER_UPDATED = "folder.updated"
TRANSFER_UPDATED = "transfer.updated"
USAGE_UPDATED = "usage.updated"

# The consumer method that relays a group message to its socket (dots become underscores).
RELAY_TYPE = "hub.event"


def chat_group(chat_id) -> str:
    return f"chat.{chat_id}"


def user_group(user_id) -> str:
    return f"user.{user_id}"


def iso(value) -> str | None:
    """A time as ISO 8601 in every payload (events, the API, exports); None stays None."""
    return value.isoformat() if value else None


def sender_payload(message) -> dict:
    agent = message.sender_agent
    if agent is not None:
        return {"type": "agent", "id": agent.pk, "name": agent.name, "avatar": agent.avatar}
    user = message.sender_user
    if user is None:
        return {"type": "user", "id": None, "name": "user", "avatar": ""}
    return {"type": "user", "id": user.pk, "name": user.get_username(), "avatar": ""}


def message_payload(message) -> dict:
    return {
        "id": message.pk,
        "chat_id": str(message.chat_id),
        "thread_id": message.thread_id,
        "sender": sender_payload(message),
        "kind": message.kind,
        "subkind": message.subkind,
        "format": message.format,
        "content": message.content,
        "data": message.data,
        "status": message.status,
        "run_id": str(message.run_id) if message.run_id else None,
        "reply_to_id": message.reply_to_id,
        "created_at": iso(message.created_at),
        "edited_at": iso(message.edited_at),
        "usage": reply_usage(message),
    }


def reply_usage(message) -> dict | None:
    """An agent's reply's model and tokens, as its provider reported them (data["usage"]); None
    for other messages and replies that used none."""
    usage = (message.data or {}).get("usage")
    if not isinstance(usage, dict) or message.sender_agent_id is None:
        return None
    return {"model": str(usage.get("model") or ""), "input_tokens": int(usage.get("input_tokens") or 0),
            "output_tokens": int(usage.get("output_tokens") or 0), "requests": int(usage.get("requests") or 0)}


def thread_payload(thread) -> dict:
    return {
        "id": thread.pk,
        "chat_id": str(thread.chat_id),
        "title": thread.title,
        "created_at": iso(thread.created_at),
        "last_activity_at": iso(thread.last_activity_at),
    }


def chat_payload(chat) -> dict:
    temporary = temporary_chats.is_temporary_chat(chat)
    return {
        "id": str(chat.pk),
        "title": chat.title,
        "description": chat.description,
        "picture": chat.picture,
        "created_at": iso(chat.created_at),
        "updated_at": iso(chat.updated_at),
        "last_message_preview": chat.last_message_preview,
        "deleted_at": iso(chat.deleted_at),
        "forked_from": str(chat.forked_from_id) if chat.forked_from_id else None,
        "kind": "temporary" if temporary else "stored",
        "expires_at": iso(temporary_chats.expires_at(chat)) if temporary else None,
        **organize_payload(chat),
    }


def organize_payload(chat) -> dict:
    """Where the chat is kept: pinned, archived, its folder's id, and its tags' names when they
    were read with it (prefetch_related("tags"): the directory, the API, the organize services).
    A payload without "tags" leaves the tags a tab knows as they are."""
    payload = {"pinned_at": iso(chat.pinned_at), "archived_at": iso(chat.archived_at), "folder_id": chat.folder_id}
    known = getattr(chat, "_prefetched_objects_cache", {})
    if "tags" in known:
        payload["tags"] = sorted((t.name for t in known["tags"]), key=str.lower)
    return payload


def folder_payload(folder) -> dict:
    return {"id": folder.pk, "name": folder.name, "instructions": folder.instructions,
            "created_at": iso(folder.created_at)}


def folder_updated(folder, *, change: str) -> dict:
    """change is one of created, renamed, instructions, deleted (its chats then have no folder)."""
    return {"type": FOLDER_UPDATED, "change": change, "folder": folder_payload(folder)}


def message_created(message, *, client_id: str | None = None) -> dict:
    return {"type": MESSAGE_CREATED, "message": message_payload(message), "client_id": client_id}


def message_edited(message) -> dict:
    return {"type": MESSAGE_EDITED, "message": message_payload(message)}


def message_settled(message) -> dict:
    return {"type": MESSAGE_SETTLED, "message": message_payload(message)}


def message_delta(*, message_id: int, run_id, offset: int, text: str, part: str = "text",
                  model_at: float | None = None, sent_at: float | None = None) -> dict:
    """model_at and sent_at (optional, Unix seconds): when the oldest text of the delta came from
    the model, and when the worker sent it. `make bench` reads them."""
    event = {
        "type": MESSAGE_DELTA,
        "message_id": message_id,
        "run_id": str(run_id),
        "offset": offset,
        "text": text,
        "part": part,
    }
    if model_at is not None:
        event["model_at"] = model_at
    if sent_at is not None:
        event["sent_at"] = sent_at
    return event


def thread_created(thread) -> dict:
    return {"type": THREAD_CREATED, "thread": thread_payload(thread)}


def chat_updated(chat, *, members: list[dict] | None = None) -> dict:
    event = {"type": CHAT_UPDATED, "chat": chat_payload(chat)}
    if members is not None:
        event["members"] = members
    return event


def chat_saved(chat) -> dict:
    """A temporary chat became a stored one: same id, same rows."""
    return {"type": CHAT_SAVED, "chat": chat_payload(chat)}


def temporary_chat_expired(chat_id) -> tuple[dict, dict]:
    """What a temporary chat's expiry tells: its tabs that it is gone (chat.deleted), and its
    owner's directory (directory.updated; the chat's rows are gone, so only its id)."""
    return ({"type": CHAT_DELETED, "chat_id": str(chat_id)},
            {"type": DIRECTORY_UPDATED, "change": "expired",
             "chat": {"id": str(chat_id), "kind": "temporary", "deleted_at": iso(timezone.now())}})


def chat_deleted(chat) -> dict:
    return {"type": CHAT_DELETED, "chat_id": str(chat.pk)}


def directory_updated(chat, *, change: str) -> dict:
    """change is one of created, renamed, deleted, restored, touched, saved, pinned, unpinned,
    archived, unarchived, moved (to or out of a folder), tagged (and expired: temporary_chat_expired)."""
    return {"type": DIRECTORY_UPDATED, "change": change, "chat": chat_payload(chat)}


def share_payload(link) -> dict:
    """A share link as its owner sees it (the link is theirs to copy): never its snapshot."""
    from django.urls import reverse

    return {
        "id": link.pk,
        "chat_id": str(link.chat_id),
        "title": link.title,
        "url": reverse("chats:shared_chat", args=[link.token]),
        "include_notes": link.include_notes,
        "include_memory": link.include_memory,
        "created_at": iso(link.created_at),
        "revoked_at": iso(link.revoked_at),
    }


def share_updated(link, *, change: str) -> dict:
    """change is created or revoked; goes to the owner's tabs (the share dialog, Shared links)."""
    return {"type": SHARE_UPDATED, "change": change, "share": share_payload(link)}


def run_payload(run) -> dict:
    return {
        "id": str(run.pk),
        "status": run.status,
        "kind": run.kind,
        "attempt": run.attempt,
        "agent_id": run.agent_id,
        "thread_id": run.thread_id,
        "reply_message_id": run.reply_message_id,
        "trigger_message_id": run.trigger_message_id,
        "error": run.error,
    }


def run_updated(run) -> dict:
    return {"type": RUN_UPDATED, "run": run_payload(run)}


def run_exhausted(run) -> dict:
    return {"type": RUN_EXHAUSTED, "run_id": str(run.pk), "attempts": run.attempt, "error": run.error,
            "reply_message_id": run.reply_message_id}


def file_updated(attachment) -> dict:
    """A file's text was read (or could not be), or reading got further."""
    from chats.attachments.files import file_payload

    return {"type": FILE_UPDATED, "file": file_payload(attachment)}


def transfer_payload(transfer) -> dict:
    """An import or export job: its progress (done of total), report, error and, for a finished
    export, where its file is downloaded (by its owner only)."""
    from django.urls import reverse

    ready = transfer.kind == "export" and transfer.status == "done" and bool(transfer.file)
    kept = timedelta(days=settings.HUB_EXPORT_KEEP_DAYS)
    return {
        "id": str(transfer.pk), "kind": transfer.kind, "format": transfer.format, "scope": transfer.scope,
        "status": transfer.status, "name": transfer.name, "total": transfer.total, "done": transfer.done,
        "report": transfer.report, "error": transfer.error, "created_at": iso(transfer.created_at),
        "finished_at": iso(transfer.finished_at),
        "download_url": reverse("api-transfer-download", args=[transfer.pk]) if ready else None,
        # When the file is deleted (HUB_EXPORT_KEEP_DAYS after the export; report.expired_at once it is).
        "expires_at": iso(transfer.finished_at + kept) if ready and transfer.finished_at else None,
    }


def transfer_updated(transfer) -> dict:
    """An import or export job was queued, started, got further, or ended (to its owner's tabs)."""
    return {"type": TRANSFER_UPDATED, "transfer": transfer_payload(transfer)}


def memory_updated(block) -> dict:
    return {
        "type": MEMORY_UPDATED,
        "block": {"label": block.label, "version": block.version, "content": block.content},
    }


def usage_updated() -> dict:
    """A reply of the user's that spends tokens ended: their Usage page reads its figures again."""
    return {"type": USAGE_UPDATED}


SEND_TIMEOUT_SECONDS = 5


class SendLoop:
    """One event loop per process, in a thread of its own, that synchronous code sends through.

    async_to_sync would run every send on a new event loop, and channels-redis keeps its Redis
    connections per loop, so each send paid for a fresh connection (about 3 ms of CPU; a streaming
    reply sends 20 deltas a second). Here the process keeps one loop and one pool. A forked child
    (a prefork pool process) starts its own loop the first time it sends.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._loop = None
        self._pid = None

    def _running_loop(self):
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="hub-send-loop", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, coroutine_function, *args):
        """Run coroutine_function(*args) there and wait for it (a thread's sends stay in order)."""
        loop = self._running_loop()
        if _current_loop() is loop:
            raise RuntimeError("a send from the send loop itself would wait for itself")
        return asyncio.run_coroutine_threadsafe(coroutine_function(*args), loop).result(SEND_TIMEOUT_SECONDS)


def _current_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


send_loop = SendLoop()


def relay(group: str, batch: list[dict]) -> None:
    """Send events to a group's sockets, in order, as one channel-layer message. Never raises."""
    try:
        send_loop.run(get_channel_layer().group_send, group, {"type": RELAY_TYPE, "events": batch})
    except Exception:
        # Live events are best effort: the database and the replay buffer are the truth.
        log.warning("could not broadcast %s to %s", [e.get("type") for e in batch], group, exc_info=True)


def broadcast_now(group: str, event: dict) -> None:
    """Send at once (for deltas, which are not part of a transaction). Never raises."""
    relay(group, [event])


class Outbox:
    """What the transactions of one batched() block committed: events, then what waits for them."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []
        self.actions: list = []

    def send(self) -> None:
        by_group: dict[str, list[dict]] = {}
        for group, event in self.events:
            by_group.setdefault(group, []).append(event)
        for group, batch in by_group.items():
            relay(group, batch)
        for action in self.actions:
            action()


_open = threading.local()


@contextlib.contextmanager
def batched():
    """The events this block's transactions broadcast go out together once it ends: one
    channel-layer message per group, not one per event. Yields the block's Outbox.

    Each message costs channels-redis four Redis round trips to send and four to receive, on the
    web process's event loop, which also hands out live deltas; a turn's start is three events
    (its reply, the run's state, the directory) in one transaction. What waits for the events
    (after_broadcasts: the Celery task of a new run) runs after they are sent, so a tab hears of
    a question before a worker can answer it. A block inside another adds to the outer one's.
    Only what commits is sent: events of a rolled-back savepoint are dropped with it.
    """
    outbox = getattr(_open, "outbox", None)
    if outbox is not None:
        yield outbox
        return
    outbox = _open.outbox = Outbox()
    try:
        yield outbox
    finally:
        _open.outbox = None
        # At once, unless an outer transaction is still open: then when it commits, after what
        # the block registered before.
        transaction.on_commit(outbox.send)


def broadcast_on_commit(group: str, event: dict) -> None:
    """Send once the surrounding transaction commits, so no tab hears of a write that rolled back."""
    with batched() as outbox:
        transaction.on_commit(lambda: outbox.events.append((group, event)))


def after_broadcasts(action) -> None:
    """Run action once the surrounding transaction commits, after the events it broadcast."""
    with batched() as outbox:
        transaction.on_commit(lambda: outbox.actions.append(action))


class EmbeddedChannelLayer(InMemoryChannelLayer):
    """The in-memory layer, safe to send to from worker threads.

    The stock in-memory layer wakes receivers through asyncio futures of the server's event loop,
    which must not be touched from another thread. The embedded Celery worker sends from its own
    threads, so sends from a foreign loop are handed to the loop that receives.
    """

    _home_loop = None

    async def receive(self, channel):
        self._home_loop = asyncio.get_running_loop()
        return await super().receive(channel)

    def _foreign_home(self):
        home = self._home_loop
        if home is not None and home.is_running() and home is not asyncio.get_running_loop():
            return home
        return None

    async def send(self, channel, message):
        home = self._foreign_home()
        if home is None:
            return await super().send(channel, message)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(super().send(channel, message), home))

    async def group_send(self, group, message):
        home = self._foreign_home()
        if home is None:
            return await super().group_send(group, message)
        return await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(super().group_send(group, message), home)
        )
