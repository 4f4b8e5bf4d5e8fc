"""Chat titles: "Chat — YYYY-MM-DD" by default, then, when the chat's agent has a real model, a
short generated title after the first reply — in its own task, so it never delays the reply."""

import asyncio
import logging
import re

from django.db import transaction

from chats import services as chat_services
from chats.models import Chat, Message
from hub.celery import app

log = logging.getLogger(__name__)

REAL_MODEL_PREFIXES = ("openai:", "anthropic:", "ollama:")
TITLE_PROMPT = (
    "Write a title of at most six words for a conversation that begins like this. "
    "Answer with the title only, no quotes.\n\nUser: {question}\n\nAssistant: {answer}"
)


def wants_generated_title(chat: Chat, reply: Message) -> bool:
    agent = reply.sender_agent
    if agent is None or not agent.model.startswith(REAL_MODEL_PREFIXES):
        return False
    if chat.title != chat_services.default_title(chat.created_at):
        return False  # the user (or an earlier title) already named it
    return not chat.messages.filter(kind=Message.Kind.MESSAGE, sender_agent__isnull=False,
                                    status=Message.Status.FINAL).exclude(pk=reply.pk).exists()


# The title's Celery task (agents_app.turns.tasks.generate_title) is sent by its name: the tasks
# import this module, never the reverse. Queued messages carry the name, so it never changes.
GENERATE_TITLE_TASK = "agents_app.generate_title"


def queue_title_after_reply(reply: Message) -> None:
    """Called when a reply succeeds; sends the title task on commit if the chat wants one."""
    if wants_generated_title(reply.chat, reply):
        transaction.on_commit(lambda: app.send_task(GENERATE_TITLE_TASK, args=[str(reply.chat_id), reply.pk],
                                                    ignore_result=True))


MAX_TITLE_WORDS = 8
MAX_TITLE_CHARS = 60


def clean_title(text: str) -> str:
    """The model's first line, without quotes or markup, cut to a few words: models ramble."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    title = re.sub(r"\s+", " ", first_line).strip().strip("\"'“”‘’*#").strip().rstrip(".")
    title = " ".join(title.split(" ")[:MAX_TITLE_WORDS])
    if len(title) > MAX_TITLE_CHARS:
        title = title[:MAX_TITLE_CHARS].rsplit(" ", 1)[0] + "…"
    return title


def generate_title(*, chat_id, reply_id) -> str | None:
    """Ask the replying agent's model for a title and rename the chat; failures keep the default."""
    from pydantic_ai import Agent as ModelAgent

    from agents_app import providers

    chat = Chat.objects.filter(pk=chat_id, deleted_at__isnull=True).first()
    reply = Message.objects.select_related("sender_agent").filter(pk=reply_id).first()
    if chat is None or reply is None or reply.sender_agent is None:
        return None
    question = chat.messages.filter(kind=Message.Kind.MESSAGE, sender_agent__isnull=True).order_by("id").first()
    prompt = TITLE_PROMPT.format(question=(question.content if question else "")[:1000], answer=reply.content[:1000])
    try:
        model = providers.build_model(reply.sender_agent, owner_id=chat.owner_id)
        result = asyncio.run(ModelAgent(model).run(prompt))
        title = clean_title(str(result.output))
    except Exception as exc:
        log.warning("chat %s: no generated title (%s)", chat_id, providers.readable_error(exc))
        return None
    if title and chat.title == chat_services.default_title(chat.created_at):
        chat_services.update_chat(chat=chat, title=title)
        return title
    return None
