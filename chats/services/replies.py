"""Streaming replies: the run machinery writes its reply message only through these, so chats
stays the one owner of message state and events."""

from django.db import transaction
from django.utils import timezone

from chats import delivery, events
from chats.models import Chat, Message, Thread
from chats.services.chats import lock_and_touch_live_chat, preview_of, touch_chat
from chats.services.messages import _check_choice, insert_message, send_message
from hub.prepared import PreparedRead


# The turn calls these two inside its own transaction: no savepoint of their own, which would cost
# two round trips of every turn's start and end. An error inside fails the turn's whole write.
@events.batched()
@transaction.atomic(savepoint=False)
def start_reply(*, chat: Chat, agent, thread: Thread | None, run, reply_to: Message | None = None) -> Message:
    """Create an agent's empty reply (status streaming) when its run starts. Sends message.created.

    Raises InvalidInput if the chat was deleted.
    """
    now = timezone.now()  # the chat's time is never older than its newest message (chats.repair)
    lock_and_touch_live_chat(chat, at=now)
    reply = insert_message(chat=chat, thread=thread, sender_agent=agent, kind=Message.Kind.MESSAGE, content="",
                           status=Message.Status.STREAMING, run=run, reply_to=reply_to, created_at=now)
    events.broadcast_on_commit(events.chat_group(chat.pk), events.message_created(reply))
    return reply


@events.batched()
@transaction.atomic(savepoint=False)
def refuse_reply(*, chat: Chat, agent, thread: Thread | None, reply_to: Message, error: str,
                 data: dict | None = None) -> Message:
    """Store the reply of an agent whose turn was not started (its user's monthly token limit, say):
    status error with the reason a user reads, as a turn that fails shows it. Call inside the
    transaction that stored reply_to (the chat is locked). Sends message.created."""
    reply = insert_message(chat=chat, thread=thread, sender_agent=agent, kind=Message.Kind.MESSAGE, content="",
                           status=Message.Status.ERROR, reply_to=reply_to, data={**(data or {}), "error": error})
    events.broadcast_on_commit(events.chat_group(chat.pk), events.message_created(reply))
    return reply


@transaction.atomic
def resume_reply(*, message: Message, run, content: str, reasoning: str = "", usage: dict | None = None) -> Message:
    """Hand an existing reply to a new run (a continuation or a regenerate) and stream on.

    usage: the tokens the run it took over from spent, added to those the reply counts.
    """
    message.run = run
    message.status = Message.Status.STREAMING
    message.content = content
    message.data = with_usage({**message.data, "reasoning": reasoning}, usage)
    message.data.pop("error", None)
    message.save(update_fields=["run", "status", "content", "data"])
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_settled(message))
    return message


def save_reply_progress(*, message_id: int, content: str, reasoning: str = "", data: dict | None = None) -> None:
    """The checkpointed text of a streaming reply (no event: deltas already went out).

    data is the reply's data as the caller holds it, when it is the reply's only writer (the turn
    streaming it); otherwise it is read first. (On PostgreSQL a turn's checkpoint writes this in
    its own statement instead: agents_app.turns.runs.save_checkpoint.)
    """
    if data is None:
        data = Message.objects.only("data").get(pk=message_id).data
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(
        content=content, data={**data, "reasoning": reasoning}
    )


USAGE_COUNTS = ("input_tokens", "output_tokens", "requests")


def with_usage(data: dict, usage: dict | None) -> dict:
    """The reply's data counting usage too: the counts added to those it holds, the model that
    answered last named."""
    if not usage:
        return data
    held = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    counts = {key: _count(held.get(key)) + _count(usage.get(key)) for key in USAGE_COUNTS}
    model = str(usage.get("model") or held.get("model") or "")[:200]
    return {**data, "usage": {"model": model, **counts}}


def _count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _store_reasoning_log(reply: Message, reasoning: str) -> None:
    """The reply's thinking, kept as a `log` message (subkind reasoning) attached to it."""
    earlier = {log_id for version in (reply.data or {}).get("versions", []) for log_id in version.get("log_ids", [])}
    log_message = (Message.objects.filter(reply_to=reply, kind=Message.Kind.LOG, subkind="reasoning")
                   .exclude(pk__in=earlier).first())  # this version's, not an earlier answer's
    if log_message is None:
        send_message(chat=reply.chat, content=reasoning, sender_agent=reply.sender_agent, thread=reply.thread,
                     kind=Message.Kind.LOG, subkind="reasoning", format=Message.Format.TEXT, reply_to=reply)
    elif log_message.content != reasoning:
        Message.objects.filter(pk=log_message.pk).update(content=reasoning)
        log_message.content = reasoning
        events.broadcast_on_commit(events.chat_group(reply.chat_id), events.message_edited(log_message))


# Locked and read at every turn's end: its SQL is built once (hub.prepared).
REPLY_TO_SETTLE = PreparedRead(
    lambda: Message.objects.select_for_update(of=("self",)).select_related("chat", "sender_agent"), "pk"
)


@transaction.atomic(savepoint=False)
def settle_reply(*, message: Message, status: str, content: str, reasoning: str = "", error: str = "",
                 usage: dict | None = None) -> Message:
    """End a reply: final, interrupted, cancelled or error (with a reason a user can read).

    usage ({model, input_tokens, output_tokens, requests}, as the provider reported them for the
    run that ends) is added to what the reply counts in data["usage"]: a reply continued after a
    recovery counts every request made for it. Sends message.settled; a final reply also moves
    the chat to the top of the directory.
    """
    _check_choice(status, Message.Status, "status")
    message = REPLY_TO_SETTLE.get(pk=message.pk)
    message.status = status
    message.content = content
    data = {**message.data, "reasoning": reasoning}
    if error:
        data["error"] = error
    else:
        data.pop("error", None)
    message.data = with_usage(data, usage)
    message.save(update_fields=["status", "content", "data"])
    if reasoning:
        _store_reasoning_log(message, reasoning)
    if status == Message.Status.FINAL and content:
        touch_chat(chat=message.chat, preview=preview_of(content))
    events.broadcast_on_commit(events.chat_group(message.chat_id), events.message_settled(message))
    if status == Message.Status.FINAL and message.kind == Message.Kind.MESSAGE:
        delivery.deliver_to_agents(message)
    return message
