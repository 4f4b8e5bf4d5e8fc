"""Read-only share links: a snapshot of a chat shown to anyone with the link, until revoked.

The snapshot is taken when the link is made and is all the shared page ever reads: later
messages, edits and deletions never reach it. It holds what a reader of the conversation sees —
each message's sender (name and avatar), format, content, time and status, grouped by thread —
and nothing that reaches further: no ids of rows, no logs (reasoning, tool steps), no file links
(a file is named, never reachable), no avatar at another address (a visitor's browser would
fetch it), and nothing about the owner. Notes and the owner's shared memory only when chosen.
"""

from django.db import transaction
from django.utils import timezone

from chats import events
from chats import memory as shared_memory
from chats.models import Chat, Message, ShareLink
from chats.services.chats import lock_live_chat
from chats.temporary import chats as temporary_chats
from hub.errors import Conflict, InvalidInput

SNAPSHOT_VERSION = 1
# A chat longer than this is refused: the shared page renders every message of it at once.
MAX_SHARED_MESSAGES = 5000
# How a chat's owner appears on the shared page: never their account's name or address.
OWNER_NAME = "User"
MAIN_THREAD_TITLE = "Main thread"


def _check_flag(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput.for_field(field, "must be true or false")
    return value


def _shown_avatar(avatar: str) -> str:
    """An emoji avatar as it is; an image address is left out (the page shows initials instead),
    so opening a shared page makes the visitor's browser fetch nothing from elsewhere."""
    avatar = (avatar or "").strip()
    if not avatar or "/" in avatar or ":" in avatar or "." in avatar:
        return ""
    return avatar[:8]


def _sender(message: Message) -> dict:
    agent = message.sender_agent
    if agent is not None:
        return {"type": "agent", "name": agent.name, "avatar": _shown_avatar(agent.avatar)}
    return {"type": "user", "name": OWNER_NAME, "avatar": ""}


def _shared_message(message: Message) -> dict:
    status = Message.Status.INTERRUPTED if message.status == Message.Status.STREAMING else message.status
    files = [{"name": str(f.get("name") or "file"), "size": f.get("size") if isinstance(f.get("size"), int) else None}
             for f in (message.data or {}).get("files", []) if isinstance(f, dict)]
    return {
        "kind": message.kind,
        "sender": _sender(message),
        "format": message.format,
        "content": message.content,
        "status": status,
        "created_at": events.iso(message.created_at),
        "edited": message.edited_at is not None,
        "files": files,
    }


def _shared_threads(chat: Chat, *, include_notes: bool) -> list[dict]:
    kinds = [Message.Kind.MESSAGE] + ([Message.Kind.NOTE] if include_notes else [])
    rows = (Message.objects.filter(chat=chat, kind__in=kinds).select_related("sender_agent")
            .only("thread_id", "sender_agent_id", "sender_agent__name", "sender_agent__avatar", "kind", "format",
                  "content", "status", "created_at", "edited_at", "data")
            .order_by("id")[: MAX_SHARED_MESSAGES + 1])
    messages = list(rows)
    if len(messages) > MAX_SHARED_MESSAGES:
        raise InvalidInput.for_field("chat", f"at most {MAX_SHARED_MESSAGES} messages can be shared")
    titles = {None: MAIN_THREAD_TITLE, **dict(chat.threads.order_by("created_at", "id").values_list("id", "title"))}
    grouped: dict = {}
    for message in messages:
        grouped.setdefault(message.thread_id, []).append(_shared_message(message))
    # The main thread first, then the others as they were started; threads with nothing shown go.
    return [{"title": title, "messages": grouped[thread_id]} for thread_id, title in titles.items()
            if thread_id in grouped]


def _shared_memory(chat: Chat) -> list[dict]:
    return [{"label": block.label, "content": block.content}
            for block in shared_memory.blocks_for(owner=chat.owner) if block.content.strip()]


def take_snapshot(chat: Chat, *, include_notes: bool, include_memory: bool) -> dict:
    """The chat as the shared page shows it, JSON-safe (see the module's docstring)."""
    return {
        "version": SNAPSHOT_VERSION,
        "title": chat.title,
        "description": chat.description,
        "picture": _shown_avatar(chat.picture),
        "threads": _shared_threads(chat, include_notes=include_notes),
        "memory": _shared_memory(chat) if include_memory else [],
    }


@transaction.atomic
def share_chat(*, chat: Chat, include_notes=False, include_memory=False) -> ShareLink:
    """Make a share link of chat, holding a snapshot of it as it is now. Sends share.updated
    (created) to the owner's tabs.

    Raises Conflict for a temporary chat (save it first: a link outlives it), InvalidInput for a
    deleted chat, a chat of more than MAX_SHARED_MESSAGES messages, or a flag that is not a boolean.
    """
    include_notes = _check_flag(include_notes, "include_notes")
    include_memory = _check_flag(include_memory, "include_memory")
    if temporary_chats.is_temporary_chat(chat) or temporary_chats.exists(chat.pk):
        raise Conflict("A temporary chat cannot be shared: save it first.")
    lock_live_chat(chat)  # a send waits, so the snapshot is one moment of the chat
    snapshot = take_snapshot(chat, include_notes=include_notes, include_memory=include_memory)
    link = ShareLink.objects.create(chat=chat, title=chat.title, snapshot=snapshot, include_notes=include_notes,
                                    include_memory=include_memory)
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.share_updated(link, change="created"))
    return link


@transaction.atomic
def revoke_share(*, link: ShareLink) -> ShareLink:
    """Stop a share link from working: its page answers 404 from now on. Idempotent. Sends
    share.updated (revoked) to the owner's tabs the first time."""
    locked = ShareLink.objects.select_for_update().select_related("chat").get(pk=link.pk)
    if locked.revoked_at is None:
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])
        events.broadcast_on_commit(events.user_group(locked.chat.owner_id),
                                   events.share_updated(locked, change="revoked"))
    link.revoked_at = locked.revoked_at
    return link
