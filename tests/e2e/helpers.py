"""Data for the browser tests, made through the real services, and small waits on the page."""

import time

from agents_app import services as agent_services
from agents_app.scripted import full_reply
from chats import services as chat_services
from chats.models import Message

# About sixty characters a second: slow enough to act mid-stream, quick enough for the suite.
SLOW = {"chunk": 3, "delay": 0.05}
QUICK = {"chunk": 20, "delay": 0.01}


def scripted_agent(user, name: str, reply: str, *, pace=QUICK, avatar="", reply_policy="always", **script):
    """An agent on the offline `test:scripted` model: it streams `reply` ({prompt} is the message);
    more script keys (reasoning, tools, fail) go to agents_app.scripted."""
    return agent_services.create_agent(owner=user, name=name, model="test:scripted", avatar=avatar,
                                       reply_policy=reply_policy,
                                       settings={"script": {"reply": reply, **pace, **script}},
                                       tools=sorted({t["name"] for t in script.get("tools", [])}))


def expected_reply(agent, prompt: str) -> str:
    return full_reply(agent.settings["script"], prompt)


def chat_with(user, *agents, title="Plans"):
    return chat_services.create_chat(owner=user, title=title, agents=list(agents))


def wait_until(predicate, *, timeout: float = 10, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def reply_of(agent, chat) -> Message | None:
    return Message.objects.filter(chat=chat, sender_agent=agent, kind="message").order_by("-id").first()


def send(page, text: str) -> None:
    """Type into the composer and press Enter, as a person does."""
    page.locator("#composer-input").fill(text)
    page.locator("#composer-input").press("Enter")


def message_item(page, message_id: int):
    return page.locator(f'li[data-message-id="{message_id}"]')


def agent_items(page, name: str):
    return page.locator("li.msg-agent", has=page.locator(".msg-sender", has_text=name))
