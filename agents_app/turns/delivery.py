"""Who answers a new message, and a cancel from the chat: the agents' side of chats.delivery.

AgentsAppConfig.ready subscribes on_message_delivered and cancel_from_chat there; chats never
imports agents_app.
"""

import re

from django.conf import settings

from agents_app.models import Agent
from agents_app.selectors import run_for_user
from agents_app.turns import runs
from agents_app.usage import limit as usage_limit
from chats import services as chat_services
from chats.models import Message
from hub.errors import NotFound


def mentions(agent: Agent, text: str) -> bool:
    return re.search(rf"(?<![\w@])@{re.escape(agent.name)}(?!\w)", text, re.IGNORECASE) is not None


def agent_hops(message: Message) -> int:
    """Agent messages in a row in the thread up to this one, since the last user message."""
    rows = Message.objects.filter(
        chat_id=message.chat_id, thread_id=message.thread_id, kind=Message.Kind.MESSAGE, pk__lte=message.pk
    ).order_by("-id").values_list("sender_agent_id", flat=True)
    hops = 0
    for sender in rows[: settings.HUB_MAX_AGENT_HOPS + 1]:
        if sender is None:
            break
        hops += 1
    return hops


def wants_to_answer(agent: Agent, message: Message, *, singled_out: bool = False) -> bool:
    """Reply policy: always answers user messages; mentioned only when @named; never never. A
    user message that @mentions agents (singled_out) is answered by those agents only.

    Another agent's message is answered only when it @mentions this agent, and at most
    HUB_MAX_AGENT_HOPS agent turns follow each other without a user message, so agents cannot loop.
    """
    if message.kind != Message.Kind.MESSAGE or agent.reply_policy == Agent.ReplyPolicy.NEVER:
        return False
    if message.sender_agent_id is None:
        if singled_out:
            return mentions(agent, message.content)
        return agent.reply_policy == Agent.ReplyPolicy.ALWAYS
    return mentions(agent, message.content) and agent_hops(message) < settings.HUB_MAX_AGENT_HOPS


def on_message_delivered(*, message, agents) -> None:
    """Inside send_message's transaction: queue a run for each member agent that answers.

    When the chat's owner has reached the monthly token limit (HUB_MONTHLY_TOKENS), no run is
    queued: each agent that would have answered leaves a failed reply saying so instead. The
    message itself is stored all the same.
    """
    agents = list(agents)
    singled_out = any(mentions(agent, message.content) for agent in agents)
    answering = [agent for agent in agents if wants_to_answer(agent, message, singled_out=singled_out)]
    if not answering:
        return
    over = usage_limit.reached(owner_id=message.chat.owner_id)  # no query when there is no limit
    for agent in answering:
        if over is None:
            runs.create_run(agent=agent, chat=message.chat, thread=message.thread, trigger_message=message)
        else:
            chat_services.refuse_reply(chat=message.chat, agent=agent, thread=message.thread, reply_to=message,
                                       error=usage_limit.limit_message(over), data={"token_limit": over})


def cancel_from_chat(*, user, chat, run_id) -> bool:
    """A cancel from the chat's websocket: only a run of that chat, owned by that user."""
    run = run_for_user(user=user, run_id=run_id)
    if run.chat_id != chat.pk:
        raise NotFound("no such run")
    return runs.request_cancel(run)
