"""Every write to conversations. Each service runs in one transaction and broadcasts after commit."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats import delivery, events
from chats.models import Chat, Membership, Message, Thread
from hub.errors import InvalidInput

PREVIEW_CHARS = 200


def default_title(now=None) -> str:
    return f"Chat — {(now or timezone.now()).date().isoformat()}"


def _clean_title(title: str, *, field: str = "title") -> str:
    title = (title or "").strip()
    if len(title) > settings.HUB_MAX_TITLE_CHARS:
        raise InvalidInput.for_field(field, f"at most {settings.HUB_MAX_TITLE_CHARS} characters")
    return title


def _check_agent_usable(*, owner, agent) -> None:
    if agent.deleted_at is not None or (agent.owner_id is not None and agent.owner_id != owner.pk):
        # Another user's agent is "not found", never "forbidden".
        raise InvalidInput.for_field("agents", f"no agent {agent.pk}")


def members_payload(chat: Chat) -> list[dict]:
    return [
        {"id": m.agent.pk, "name": m.agent.name, "avatar": m.agent.avatar, "description": m.agent.description}
        for m in chat.memberships.select_related("agent").order_by("added_at", "id")
    ]


def _announce_chat_change(chat: Chat, *, change: str, members: bool = False) -> None:
    events.broadcast_on_commit(
        events.chat_group(chat.pk), events.chat_updated(chat, members=members_payload(chat) if members else None)
    )
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change=change))


@transaction.atomic
def create_chat(*, owner, title: str = "", description: str = "", picture: str = "", agents=()) -> Chat:
    """Create a chat owned by owner, with agents as members. Sends directory.updated.

    Raises InvalidInput for a too-long title or an agent the owner may not use.
    """
    agents = list(agents)
    for agent in agents:
        _check_agent_usable(owner=owner, agent=agent)
    chat = Chat.objects.create(
        owner=owner,
        title=_clean_title(title) or default_title(),
        description=(description or "").strip(),
        picture=(picture or "").strip(),
    )
    Membership.objects.bulk_create([Membership(chat=chat, agent=agent) for agent in agents])
    events.broadcast_on_commit(events.user_group(owner.pk), events.directory_updated(chat, change="created"))
    return chat


@transaction.atomic
def update_chat(*, chat: Chat, title: str | None = None, description: str | None = None,
                picture: str | None = None) -> Chat:
    """Change a chat's title, description or picture. Sends chat.updated and directory.updated."""
    if title is not None:
        chat.title = _clean_title(title) or chat.title
    if description is not None:
        chat.description = description.strip()
    if picture is not None:
        chat.picture = picture.strip()
    chat.save(update_fields=["title", "description", "picture"])
    _announce_chat_change(chat, change="renamed")
    return chat


@transaction.atomic
def add_member(*, chat: Chat, agent) -> Membership:
    """Add agent to chat; adding a member again returns the existing membership."""
    _check_agent_usable(owner=chat.owner, agent=agent)
    membership, created = Membership.objects.get_or_create(chat=chat, agent=agent)
    if created:
        _announce_chat_change(chat, change="touched", members=True)
    return membership


@transaction.atomic
def remove_member(*, chat: Chat, agent) -> bool:
    """Remove agent from chat; returns whether it was a member."""
    deleted, _ = Membership.objects.filter(chat=chat, agent=agent).delete()
    if deleted:
        _announce_chat_change(chat, change="touched", members=True)
    return bool(deleted)


@transaction.atomic
def delete_chat(*, chat: Chat) -> Chat:
    """Soft-delete a chat and remove its memberships. Idempotent.

    Its open tabs get chat.deleted; the owner's tabs get directory.updated.
    """
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    if locked.deleted_at is not None:
        chat.deleted_at = locked.deleted_at
        return chat
    chat.deleted_at = timezone.now()
    Chat.objects.filter(pk=chat.pk).update(deleted_at=chat.deleted_at)
    chat.memberships.all().delete()
    events.broadcast_on_commit(events.chat_group(chat.pk), events.chat_deleted(chat))
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="deleted"))
    return chat


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


def preview_of(content: str) -> str:
    return " ".join(content.split())[:PREVIEW_CHARS]


def touch_chat(*, chat: Chat, preview: str | None = None, at=None) -> None:
    """Move the chat to the top of its owner's directory (and change its preview)."""
    chat.updated_at = at or timezone.now()
    fields = ["updated_at"]
    if preview is not None:
        chat.last_message_preview = preview
        fields.append("last_message_preview")
    Chat.objects.filter(pk=chat.pk).update(**{f: getattr(chat, f) for f in fields})
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="touched"))


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
) -> Message:
    """Store a message from the chat's owner (no sender_agent) or an agent, and deliver it.

    Goes into the default thread, the given thread, or a new thread named new_thread_title.
    Sends thread.created (for a new thread) and message.created (echoing client_id) to the chat's
    tabs, and notifies every member agent except the sender; resource messages reach no agent.
    Raises InvalidInput for empty or oversized content, an unknown kind or format, a thread of
    another chat, or a deleted chat.
    """
    # The row lock orders concurrent sends and a delete: nothing lands in a chat once deleted.
    if Chat.objects.select_for_update().values_list("deleted_at", flat=True).get(pk=chat.pk) is not None:
        raise InvalidInput.for_field("chat", "this chat was deleted")
    _check_choice(kind, Message.Kind, "kind")
    _check_choice(format, Message.Format, "format")
    _check_choice(status, Message.Status, "status")
    streaming = status == Message.Status.STREAMING
    content = _clean_content(content, kind=kind, allow_empty=streaming or kind == Message.Kind.LOG)
    if data is not None and not isinstance(data, dict):
        raise InvalidInput.for_field("data", "must be an object")
    if client_id is not None and (not isinstance(client_id, str) or len(client_id) > 100):
        raise InvalidInput.for_field("client_id", "must be text of at most 100 characters")

    thread, thread_is_new = _resolve_thread(chat=chat, thread=thread, new_thread_title=new_thread_title)
    message = Message.objects.create(
        chat=chat,
        thread=thread,
        sender_user=None if sender_agent else chat.owner,
        sender_agent=sender_agent,
        kind=kind,
        subkind=subkind,
        format=format,
        content=content,
        data=data or {},
        status=status,
        run=run,
        reply_to=reply_to,
    )
    if thread is not None:
        Thread.objects.filter(pk=thread.pk).update(last_activity_at=message.created_at)
        thread.last_activity_at = message.created_at
    if kind == Message.Kind.MESSAGE:
        touch_chat(chat=chat, preview=preview_of(content) if content else None, at=message.created_at)

    if thread_is_new:
        events.broadcast_on_commit(events.chat_group(chat.pk), events.thread_created(thread))
    events.broadcast_on_commit(events.chat_group(chat.pk), events.message_created(message, client_id=client_id))
    if not streaming:
        # A streamed reply is delivered when it settles, with its content (settle_reply).
        delivery.deliver_to_agents(message)
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


# --- Streaming replies ----------------------------------------------------------------------
# The run machinery writes its reply message only through these, so chats stays the one owner
# of message state and events.

def start_reply(*, chat: Chat, agent, thread: Thread | None, run, reply_to: Message | None = None) -> Message:
    """Create an agent's empty reply (status streaming) when its run starts."""
    return send_message(
        chat=chat, content="", sender_agent=agent, thread=thread, status=Message.Status.STREAMING, run=run,
        reply_to=reply_to,
    )


@transaction.atomic
def resume_reply(*, message: Message, run, content: str, reasoning: str = "") -> Message:
    """Hand an existing reply to a new run (a continuation or a regenerate) and stream on."""
    message.run = run
    message.status = Message.Status.STREAMING
    message.content = content
    message.data = {**message.data, "reasoning": reasoning}
    message.data.pop("error", None)
    message.save(update_fields=["run", "status", "content", "data"])
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_settled(message))
    return message


def save_reply_progress(*, message_id: int, content: str, reasoning: str = "") -> None:
    """The checkpointed text of a streaming reply (no event: deltas already went out)."""
    message = Message.objects.only("data").get(pk=message_id)
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(
        content=content, data={**message.data, "reasoning": reasoning}
    )


def _store_reasoning_log(reply: Message, reasoning: str) -> None:
    """The reply's thinking, kept as a `log` message (subkind reasoning) attached to it."""
    log_message = Message.objects.filter(reply_to=reply, kind=Message.Kind.LOG, subkind="reasoning").first()
    if log_message is None:
        send_message(chat=reply.chat, content=reasoning, sender_agent=reply.sender_agent, thread=reply.thread,
                     kind=Message.Kind.LOG, subkind="reasoning", format=Message.Format.TEXT, reply_to=reply)
    elif log_message.content != reasoning:
        Message.objects.filter(pk=log_message.pk).update(content=reasoning)
        log_message.content = reasoning
        events.broadcast_on_commit(events.chat_group(reply.chat_id), events.message_edited(log_message))


@transaction.atomic
def settle_reply(*, message: Message, status: str, content: str, reasoning: str = "", error: str = "") -> Message:
    """End a reply: final, interrupted, cancelled or error (with a reason a user can read).

    Sends message.settled; a final reply also moves the chat to the top of the directory.
    """
    _check_choice(status, Message.Status, "status")
    message = Message.objects.select_for_update(of=("self",)).select_related("chat", "sender_agent").get(
        pk=message.pk
    )
    message.status = status
    message.content = content
    data = {**message.data, "reasoning": reasoning}
    if error:
        data["error"] = error
    else:
        data.pop("error", None)
    message.data = data
    message.save(update_fields=["status", "content", "data"])
    if reasoning:
        _store_reasoning_log(message, reasoning)
    if status == Message.Status.FINAL and content:
        touch_chat(chat=message.chat, preview=preview_of(content))
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_settled(message))
    if status == Message.Status.FINAL and message.kind == Message.Kind.MESSAGE:
        delivery.deliver_to_agents(message)
    return message
