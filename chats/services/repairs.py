"""Writes that put conversations right after something went wrong (the admin and hub_repair).

Each is safe to run twice: it re-reads the row under a lock and does nothing when the state it
repairs is already gone.
"""

from django.db import connection, transaction
from django.utils import timezone

from chats import search_sql
from chats.models import Chat, Message
from chats.services.chats import preview_of, touch_chat
from chats.services.replies import settle_reply
from chats.streams import furthest_parts, replay_buffer
from hub.errors import Conflict


def stuck_reply_text(message: Message) -> dict:
    """The most a stuck reply had produced: its stored text, or the replay buffer when longer."""
    return furthest_parts(message.pk, {"text": message.content, "reasoning": (message.data or {}).get("reasoning", "")})


@transaction.atomic
def settle_stuck_reply(*, message: Message, live_run_exists) -> Message:
    """Settle a reply that shows as streaming although no run will ever finish it, as interrupted.

    The text it had (stored, or streamed further into the replay buffer) is kept, so the user can
    read it and continue the turn. live_run_exists(message) is asked under the message's row lock;
    when a run is still live for it, Conflict is raised and nothing changes. Sends message.settled.
    """
    locked = Message.objects.select_for_update(of=("self",)).filter(pk=message.pk).first()
    if locked is None or locked.status != Message.Status.STREAMING:
        raise Conflict(f"message {message.pk} is no longer streaming")
    if live_run_exists(locked):
        raise Conflict(f"message {message.pk} still has a live run; cancel or recover the run instead")
    parts = stuck_reply_text(locked)
    settled = settle_reply(message=locked, status=Message.Status.INTERRUPTED, content=parts["text"],
                           reasoning=parts["reasoning"])
    transaction.on_commit(lambda: replay_buffer().clear(message.pk))
    return settled


def expected_summary(chat: Chat) -> tuple[str, object]:
    """(preview, updated_at floor) the chat's messages call for: the newest settled message's text,
    and the time of its newest message (the chat may be newer, never older)."""
    messages = Message.objects.filter(chat=chat, kind=Message.Kind.MESSAGE).order_by("-id")
    newest_final = messages.filter(status=Message.Status.FINAL).exclude(content="").only("content").first()
    newest = messages.only("created_at").first()
    return (preview_of(newest_final.content) if newest_final else ""), (newest.created_at if newest else None)


@transaction.atomic
def resync_chat_summary(*, chat: Chat) -> Chat:
    """Set a chat's preview and updated time from its messages. Sends directory.updated (touched).

    The updated time only moves forward to the newest message's time (a time in the future comes
    back to it, or to the chat's creation when it has no messages).
    """
    chat = Chat.objects.select_for_update().get(pk=chat.pk)
    preview, newest_at = expected_summary(chat)
    at = chat.updated_at
    if at > timezone.now():
        at = newest_at or chat.created_at
    if newest_at is not None and at < newest_at:
        at = newest_at
    touch_chat(chat=chat, preview=preview, at=at)
    return chat


def rebuild_search_index(*, index: str) -> None:
    """Make one full-text index whole again (index names as chats.repair reports them).

    PostgreSQL: (re)create a GIN index that is missing or invalid, or the message search table's
    triggers (and refill it) when one is missing. SQLite: re-create the FTS tables
    and their triggers when triggers are missing, or rebuild one FTS table from its rows.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql" and index == "triggers":
            # The message search table, its functions and triggers, then every row indexed again.
            for statement in search_sql.POSTGRES_MESSAGE_SEARCH:
                cursor.execute(statement)
            cursor.execute("TRUNCATE chats_message_search")
            cursor.execute(search_sql.POSTGRES_MESSAGE_SEARCH_FILL)
        elif connection.vendor == "postgresql":
            statement = next((s for s in search_sql.POSTGRES if f"EXISTS {index} ON" in s), None)
            if statement is None:
                raise ValueError(f"no search index {index!r}")
            cursor.execute(f"DROP INDEX IF EXISTS {index}")
            cursor.execute(statement)
        elif index == "triggers":
            for statement in search_sql.SQLITE_REVERSE + search_sql.SQLITE:
                cursor.execute(statement)
        elif index == "chats_chat_fts":
            cursor.execute("DELETE FROM chats_chat_fts")
            cursor.execute("INSERT INTO chats_chat_fts(chat_id, body) SELECT id, title || ' ' || description "
                           "FROM chats_chat")
        else:
            raise ValueError(f"no search index {index!r}")
