"""The fan-out of a new message to the chat's member agents.

chats never imports the agent machinery: agents_app subscribes a handler here at start-up
(AgentsAppConfig.ready). Handlers run inside the transaction that stored the message, so whatever
they write (the queued runs) commits or rolls back with it.
"""

from collections.abc import Callable

from chats.models import Membership, Message
from hub.prepared import PreparedRead

AgentDeliveryHandler = Callable[..., None]
_handlers: list[AgentDeliveryHandler] = []
_cancel_handler: Callable[..., bool] | None = None


def on_cancel(handler: Callable[..., bool]) -> None:
    """agents_app registers how a run is cancelled: handler(user=, chat=, run_id=)."""
    global _cancel_handler
    _cancel_handler = handler


def cancel_run(*, user, chat, run_id) -> bool:
    if _cancel_handler is None:
        return False
    return _cancel_handler(user=user, chat=chat, run_id=run_id)


def subscribe(handler: AgentDeliveryHandler) -> None:
    """Register handler(message=..., agents=[...]); registering the same one twice is a no-op."""
    if handler not in _handlers:
        _handlers.append(handler)


def unsubscribe(handler: AgentDeliveryHandler) -> None:
    if handler in _handlers:
        _handlers.remove(handler)


def recipients(message: Message) -> list:
    """The member agents a message goes to: every member except its sender; none for resources."""
    if message.kind == Message.Kind.RESOURCE:
        return []
    return [agent for agent in MEMBER_AGENTS.fetch(memberships__chat=message.chat_id)
            if agent.pk != message.sender_agent_id]


# A chat's member agents in the order they joined, read at every send and every turn's end: its
# SQL is built once (hub.prepared). chats knows agents only as members: the model is the
# membership's own relation's.
MEMBER_AGENTS = PreparedRead(
    lambda: Membership._meta.get_field("agent").related_model.objects.filter(deleted_at__isnull=True)
    .order_by("memberships__added_at", "memberships__id"),
    "memberships__chat",
)


def deliver_to_agents(message: Message) -> list:
    agents = recipients(message)
    if agents:
        for handler in list(_handlers):
            handler(message=message, agents=agents)
    return agents
