"""Chat titles: "Chat — YYYY-MM-DD" by default, then a real title after the first reply, in its
own task so it never delays the reply: written by the replying agent's model when it is a
language model, else (an offline agent such as the Librarian, or a model that failed) the
first message's words. A title never holds Markdown."""

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
    if reply.sender_agent is None:
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
    """The first line of a text as plain words, cut to a few: models ramble, and a sidebar shows
    no Markdown (links keep their text; emphasis, code marks, headings and quotes go)."""
    first_line = next((line for line in chat_services.plain_text(text).splitlines() if line.strip()), "")
    title = re.sub(r"\s+", " ", first_line).strip().strip("\"'“”‘’").strip().rstrip(".:")
    title = " ".join(title.split(" ")[:MAX_TITLE_WORDS])
    if len(title) > MAX_TITLE_CHARS:
        title = title[:MAX_TITLE_CHARS].rsplit(" ", 1)[0] + "…"
    return title


def generate_title(*, chat_id, reply_id) -> str | None:
    """Title the chat after its first reply (the model's title, else the first message's words);
    a chat the user named meanwhile keeps its name."""
    chat = Chat.objects.filter(pk=chat_id, deleted_at__isnull=True).first()
    reply = Message.objects.select_related("sender_agent").filter(pk=reply_id).first()
    if chat is None or reply is None or reply.sender_agent is None:
        return None
    question = chat.messages.filter(kind=Message.Kind.MESSAGE, sender_agent__isnull=True).order_by("id").first()
    asked = question.content if question else ""
    title = ""
    if reply.sender_agent.model.startswith(REAL_MODEL_PREFIXES):
        title = _model_title(chat, reply, asked)
    title = title or _capitalised(clean_title(asked) or clean_title(reply.content))
    chat.refresh_from_db(fields=["title"])
    if title and chat.title == chat_services.default_title(chat.created_at):
        chat_services.update_chat(chat=chat, title=title)
        return title
    return None


def _capitalised(title: str) -> str:
    return title[:1].upper() + title[1:]


def _model_title(chat: Chat, reply: Message, asked: str) -> str:
    """The replying agent's model's title for the exchange; "" when it fails."""
    from pydantic_ai import Agent as ModelAgent

    from agents_app import providers

    prompt = TITLE_PROMPT.format(question=asked[:1000], answer=reply.content[:1000])
    try:
        model = providers.build_model(reply.sender_agent, owner_id=chat.owner_id)
        return clean_title(str(asyncio.run(ModelAgent(model).run(prompt)).output))
    except Exception as exc:
        log.warning("chat %s: no title from the model (%s); the first message's words instead",
                    chat.pk, providers.readable_error(exc))
        return ""
