"""Writes to messages: send (with delivery to member agents) and edit."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats import agent_port, delivery, events
from chats.attachments.files import file_payload
from chats.models import Chat, Message, Thread
from chats.services import attachments
from chats.services.chats import _clean_title, lock_and_touch_live_chat, lock_live_chat, preview_of, touch_chat
from hub.errors import InvalidInput


def _clean_content(content, *, kind: str, allow_empty: bool) -> str:
    if not isinstance(content, str):
        raise InvalidInput.for_field("content", "must be text")
    if len(content) > settings.HUB_MAX_MESSAGE_CHARS:
        raise InvalidInput.for_field("content", f"at most {settings.HUB_MAX_MESSAGE_CHARS} characters")
    if not allow_empty and not content.strip():
        raise InvalidInput.for_field("content", "may not be empty")
    return content


def _check_choice(value: str, choices, field: str) -> str:
    if value not in choices.values:
        raise InvalidInput.for_field(field, f"must be one of {', '.join(choices.values)}")
    return value


def _resolve_thread(*, chat: Chat, thread: Thread | None, new_thread_title: str | None) -> tuple[Thread | None, bool]:
    if thread is not None and new_thread_title:
        raise InvalidInput.for_field("thread", "give a thread or a new thread title, not both")
    if thread is not None:
        if thread.chat_id != chat.pk:
            raise InvalidInput.for_field("thread", f"no thread {thread.pk} in this chat")
        return thread, False
    if new_thread_title is not None:
        title = _clean_title(new_thread_title, field="new_thread_title")
        if not title:
            raise InvalidInput.for_field("new_thread_title", "may not be empty")
        return Thread.objects.create(chat=chat, title=title), True
    return None, False


@events.batched()
@transaction.atomic
def send_message(
    *,
    chat: Chat,
    content: str,
    sender_agent=None,
    thread: Thread | None = None,
    new_thread_title: str | None = None,
    kind: str = Message.Kind.MESSAGE,
    subkind: str = "",
    format: str = Message.Format.MARKDOWN,
    data: dict | None = None,
    status: str = Message.Status.FINAL,
    run=None,
    reply_to: Message | None = None,
    client_id: str | None = None,
    files: list | None = None,
) -> Message:
    """Store a message from the chat's owner (no sender_agent) or an agent, and deliver it.

    files: ids of the chat's unsent uploads (chats.services.attachments) the message carries; a
    message with files may have no text.

    Goes into the default thread, the given thread, or a new thread named new_thread_title.
    Sends thread.created (for a new thread) and message.created (echoing client_id) to the chat's
    tabs, and notifies every member agent except the sender; resource messages reach no agent.
    Raises InvalidInput for empty or oversized content, an unknown kind or format, a thread of
    another chat, or a deleted chat.
    """
    _check_choice(kind, Message.Kind, "kind")
    _check_choice(format, Message.Format, "format")
    _check_choice(status, Message.Status, "status")
    streaming = status == Message.Status.STREAMING
    content = _clean_content(content, kind=kind, allow_empty=streaming or kind == Message.Kind.LOG or bool(files))
    if data is not None and not isinstance(data, dict):
        raise InvalidInput.for_field("data", "must be an object")
    if client_id is not None and (not isinstance(client_id, str) or len(client_id) > 100):
        raise InvalidInput.for_field("client_id", "must be text of at most 100 characters")

    now = timezone.now()
    if kind == Message.Kind.MESSAGE:  # a conversation's message moves the chat up, with its preview
        lock_and_touch_live_chat(chat, at=now, preview=preview_of(content) if content else None)
    else:
        lock_live_chat(chat)
    thread, thread_is_new = _resolve_thread(chat=chat, thread=thread, new_thread_title=new_thread_title)
    message = insert_message(
        chat=chat, thread=thread, sender_user=None if sender_agent else chat.owner, sender_agent=sender_agent,
        kind=kind, subkind=subkind, format=format, content=content, data=data or {}, status=status, run=run,
        reply_to=reply_to, created_at=now,
    )
    if files:
        attached = attachments.attach_files(message=message, file_ids=files)
        message.data = {**message.data, "files": [file_payload(a) for a in attached]}
        message.save(update_fields=["data"])
        if kind == Message.Kind.MESSAGE and not content:  # the preview of files alone is their names
            touch_chat(chat=chat, preview=preview_of(", ".join(a.name for a in attached)), at=now)
    if thread_is_new:
        events.broadcast_on_commit(events.chat_group(chat.pk), events.thread_created(thread))
    events.broadcast_on_commit(events.chat_group(chat.pk), events.message_created(message, client_id=client_id))
    if not streaming:
        # A streamed reply is delivered when it settles, with its content (settle_reply).
        delivery.deliver_to_agents(message)
    return message


def insert_message(*, chat: Chat, thread: Thread | None, **fields) -> Message:
    """Store a checked message in a locked chat (lock_live_chat) and mark its thread active. The
    caller sends message.created, after the chat's own events."""
    message = Message.objects.create(chat=chat, thread=thread, **fields)
    if thread is not None:
        Thread.objects.filter(pk=thread.pk).update(last_activity_at=message.created_at)
        thread.last_activity_at = message.created_at
    return message


@transaction.atomic
def resubmit_message(*, message: Message, content: str) -> Message:
    """Edit the user's own message and have the agents answer it again: each agent's reply to it
    is answered anew into the same reply, its earlier text kept as a version (as a regenerate
    does); a message no agent answered yet goes to the agents again as if just sent. Raises
    InvalidInput for another kind of message or a reply to it still streaming; nothing changes then."""
    if message.kind != Message.Kind.MESSAGE or message.sender_agent_id is not None:
        raise InvalidInput.for_field("message", "only your own message can be submitted again")
    message = edit_message(message=message, content=content)
    replies = list(Message.objects.filter(chat=message.chat_id, kind=Message.Kind.MESSAGE, sender_agent__isnull=False,
                                          run__trigger_message=message).order_by("id"))
    if replies:
        for reply in replies:
            agent_port.agents().regenerate(message=reply)
    else:
        delivery.deliver_to_agents(message)
    return message


FEEDBACK_RATINGS = ("up", "down")


@transaction.atomic
def rate_reply(*, message: Message, rating: str | None) -> Message:
    """A thumb up or down on an agent's reply, kept in its data with the time (None takes it back).
    Sends message.edited, so the chat's other tabs show it. InvalidInput for anything but an
    agent's reply or a rating other than "up", "down" or none."""
    if rating is not None and rating not in FEEDBACK_RATINGS:
        raise InvalidInput.for_field("rating", 'must be "up", "down" or null')
    message = Message.objects.select_for_update(of=("self",)).select_related("chat", "sender_agent").get(pk=message.pk)
    if message.kind != Message.Kind.MESSAGE or message.sender_agent_id is None:
        raise InvalidInput.for_field("message", "only an agent's reply takes feedback")
    data = {key: value for key, value in (message.data or {}).items() if key != "feedback"}
    if rating is not None:
        data["feedback"] = {"rating": rating, "at": timezone.now().isoformat()}
    message.data = data
    message.save(update_fields=["data"])
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_edited(message))
    return message


@transaction.atomic
def edit_message(*, message: Message, content: str) -> Message:
    """Replace a settled message's content. Sends message.edited.

    Raises InvalidInput for empty or oversized content, or a message still streaming.
    """
    message = (
        Message.objects.select_for_update(of=("self",))
        .select_related("chat", "sender_agent", "sender_user")
        .get(pk=message.pk)
    )
    if message.status == Message.Status.STREAMING:
        raise InvalidInput.for_field("message", "a reply that is still streaming cannot be edited")
    if message.kind not in (Message.Kind.MESSAGE, Message.Kind.NOTE):
        raise InvalidInput.for_field("message", f"a {message.kind} message cannot be edited")
    message.content = _clean_content(content, kind=message.kind, allow_empty=False)
    message.edited_at = timezone.now()
    message.save(update_fields=["content", "edited_at"])
    latest = message.chat.messages.filter(kind=Message.Kind.MESSAGE).order_by("-id").values_list("id", flat=True)
    if latest.first() == message.pk:
        touch_chat(chat=message.chat, preview=preview_of(message.content), at=message.chat.updated_at)
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_edited(message))
    return message


