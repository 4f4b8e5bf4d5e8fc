"""Sending and streaming as a person sees it: two tabs, optimistic sends, cancel, regenerate."""

import json
import re

import pytest
from playwright.sync_api import expect

from chats import services as chat_services
from chats.models import Message, Thread
from tests.e2e.helpers import (
    SLOW,
    agent_items,
    chat_with,
    expected_reply,
    message_item,
    reply_of,
    scripted_agent,
    send,
    wait_until,
)

LONG = "Noted: {prompt}. " + "Each word arrives in order, once, in both tabs. " * 3


def _thread_with_history(user, chat, agent):
    """A fresh thread both tabs open on (the agent joins after, so it answers nothing yet)."""
    chat_services.remove_member(chat=chat, agent=agent)
    thread = Thread.objects.create(chat=chat, title="Week plan")
    chat_services.send_message(chat=chat, content="Earlier question", thread=thread)
    chat_services.send_message(chat=chat, content="An earlier answer.", thread=thread, sender_agent=agent)
    chat_services.add_member(chat=chat, agent=agent)
    return thread


def test_two_tabs_send_stream_and_settle(user, open_page, screenshot):
    agent = scripted_agent(user, "Scribe", LONG, pace=SLOW, avatar="🪶")
    chat = chat_with(user, agent, title="Two tabs")
    _thread_with_history(user, chat, agent)
    tab_a = open_page(user, f"/chats/{chat.pk}/", label="A")
    tab_b = open_page(user, f"/chats/{chat.pk}/", label="B")

    send(tab_a, "Plan the week")
    # Optimistic: the message is on the page before the hub has answered, then confirmed.
    mine = tab_a.locator("li.msg-user", has_text="Plan the week")
    expect(mine).to_have_count(1)
    stored = wait_until(lambda: Message.objects.filter(chat=chat, content="Plan the week").first(), what="the message")
    expect(message_item(tab_a, stored.pk)).not_to_have_class(re.compile("pending"))
    expect(message_item(tab_b, stored.pk)).to_have_count(1)

    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.pk > stored.pk and r, what="the reply")
    for tab in (tab_a, tab_b):
        expect(message_item(tab, reply.pk)).to_have_class(re.compile("status-streaming"))
        expect(message_item(tab, reply.pk).locator(".msg-content")).to_contain_text("Each word arrives")
    screenshot(tab_a, "chat-streaming")

    text = expected_reply(agent, "Plan the week")
    for tab in (tab_a, tab_b):
        expect(message_item(tab, reply.pk)).to_have_class(re.compile("status-final"), timeout=15_000)
        assert message_item(tab, reply.pk).locator(".msg-content").inner_text().strip() == text.strip()
        # One user message and one reply each: nothing shown twice.
        expect(tab.locator("li.msg-user", has_text="Plan the week")).to_have_count(1)
        expect(tab.locator(f'li[data-message-id="{reply.pk}"]')).to_have_count(1)
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == "final", what="the stored reply to settle")
    screenshot(tab_a, "chat-settled")


def test_cancel_stops_a_reply_and_keeps_its_text(user, open_page):
    agent = scripted_agent(user, "Slow", LONG, pace={"chunk": 2, "delay": 0.06})
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "Take your time")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    item = message_item(page, reply.pk)
    expect(item.locator(".msg-content")).to_contain_text("Noted")
    item.get_by_role("button", name="Stop").click()
    expect(item).to_have_class(re.compile("status-cancelled"))
    expect(item.locator(".run-state")).to_have_text("Stopped")
    stored = wait_until(lambda: (m := Message.objects.get(pk=reply.pk)).status == "cancelled" and m, what="cancelled")
    assert 0 < len(stored.content) < len(expected_reply(agent, "Take your time"))
    assert item.locator(".msg-content").inner_text().strip() == stored.content.strip()


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
@pytest.mark.parametrize("how", ["button", "escape"])
def test_while_a_reply_streams_send_becomes_stop_and_escape_stops_too(user, open_page, viewport, how):
    agent = scripted_agent(user, "Slow", LONG, pace={"chunk": 2, "delay": 0.06})
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", viewport=viewport)
    send(page, "Take your time")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    item = message_item(page, reply.pk)
    expect(item.locator(".msg-content")).to_contain_text("Noted")
    button = page.locator("#composer button.send")
    expect(button).to_have_text("Stop")
    box = page.locator("#composer-input")
    box.fill("a next question")
    expect(button).to_have_text("Send")  # something written: the button sends it
    box.fill("")
    if how == "button":
        button.click()
    else:
        box.press("Escape")
    expect(item).to_have_class(re.compile("status-cancelled"))
    expect(button).to_have_text("Send")
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == "cancelled", what="the stored reply cancelled")
    assert Message.objects.filter(chat=chat, sender_agent__isnull=True).count() == 1  # nothing sent by Stop


def test_reload_mid_stream_shows_the_text_so_far_and_cancel_still_works(user, open_page):
    agent = scripted_agent(user, "Slow", LONG * 2, pace={"chunk": 2, "delay": 0.05})
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "Stream for a while")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    expect(message_item(page, reply.pk).locator(".msg-content")).to_contain_text("Each word")
    page.reload()
    page.wait_for_selector("body.js-ready")
    item = message_item(page, reply.pk)
    # At once the whole text so far (the replay buffer), then it streams on.
    expect(item.locator(".msg-content")).to_contain_text("Each word arrives")
    before = len(item.locator(".msg-content").inner_text())
    wait_until(lambda: len(item.locator(".msg-content").inner_text()) > before + 10, what="the stream to go on")
    item.get_by_role("button", name="Stop").click()
    expect(item).to_have_class(re.compile("status-cancelled"))
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == "cancelled", what="the stored reply cancelled")


def test_regenerate_streams_a_new_version_and_keeps_the_old(user, open_page):
    agent = scripted_agent(user, "Echo", "Answer to {prompt}.", reasoning="First I think, then I answer.",
                           tools=[{"name": "record_effect", "args": {"key": "regen"}}])
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "the question")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    item = message_item(page, reply.pk)
    expect(item).to_have_class(re.compile("status-final"))
    # Reasoning and the tool step sit collapsed under the reply.
    logs = item.locator("details.log")
    expect(logs).to_have_count(2)
    for index in range(2):
        assert logs.nth(index).get_attribute("open") is None
    expect(item.locator("details.log-reasoning summary")).to_have_text("Reasoning")
    item.locator("details.log-reasoning summary").click()
    expect(item.locator("details.log-reasoning .log-body")).to_contain_text("First I think")

    item.hover()
    item.get_by_role("button", name="Regenerate").click()
    wait_until(lambda: len(Message.objects.get(pk=reply.pk).data.get("versions", [])) == 1, what="a kept version")
    expect(item.locator(".version-count")).to_have_text("2/2", timeout=10_000)
    expect(item).to_have_class(re.compile("status-final"))
    item.hover()
    item.get_by_role("button", name="Earlier version").click()
    expect(item.locator(".version-count")).to_have_text("1/2")
    expect(agent_items(page, "Echo")).to_have_count(1)


def test_a_reply_whose_run_update_comes_late_never_shows_beside_a_waiting_placeholder(user, open_page):
    """The reply's message.created and the run.updated that names it are separate frames; here the
    latter is held back until the reply has streamed a while. The reply shows once, alone: never
    beside a "Waiting to start…" entry of the same agent."""
    agent = scripted_agent(user, "Herald", LONG, pace=SLOW)
    chat = chat_with(user, agent, title="Late run update")
    page = open_page(user, "/")
    held, frames_since_reply = [], []

    def relay_from_hub(ws, message):
        event = json.loads(message) if isinstance(message, str) else {}
        if event.get("type") == "run.updated" and event["run"].get("reply_message_id") and not frames_since_reply:
            held.append(message)  # named reply, sent to the page only after a few deltas
            return
        ws.send(message)
        if held and event.get("type") == "message.delta":
            frames_since_reply.append(event)
            if len(frames_since_reply) == 5:
                ws.send(held.pop())

    def route(ws):
        hub = ws.connect_to_server()
        hub.on_message(lambda message: relay_from_hub(ws, message))
        ws.on_message(hub.send)

    page.route_web_socket(re.compile(r"/ws/chats/"), route)
    page.goto(f"{page.url.rstrip('/')}/chats/{chat.pk}/")
    page.wait_for_selector("body.js-ready")
    # Every change to the list is looked at: the most entries one agent had at any moment.
    page.evaluate("""() => {
      window.mostEntries = 0;
      const count = () => {
        const senders = [...document.querySelectorAll("li.msg-agent .msg-sender")];
        const herald = senders.filter((s) => s.textContent === "Herald").length;
        window.mostEntries = Math.max(window.mostEntries, herald);
      };
      new MutationObserver(count).observe(document.body, { childList: true, subtree: true });
    }""")
    send(page, "Announce it")

    reply = agent_items(page, "Herald")
    expect(reply).to_have_class(re.compile("status-final"), timeout=20_000)
    assert len(frames_since_reply) >= 5 and not held  # the run update did come late, then came
    assert reply.locator(".msg-content").inner_text().strip() == expected_reply(agent, "Announce it").strip()
    assert page.evaluate("window.mostEntries") == 1


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_a_thumb_on_a_reply_is_kept_and_shows_in_other_tabs(user, open_page, viewport):
    agent = scripted_agent(user, "Helper", "A fine answer.")
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", viewport=viewport)
    send(page, "Help me")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    other = open_page(user, f"/chats/{chat.pk}/", label="B")  # opens on the same thread
    expect(message_item(other, reply.pk)).to_have_count(1)
    item = message_item(page, reply.pk)
    item.hover()
    item.get_by_role("button", name="Good reply").click()
    expect(item.get_by_role("button", name="Good reply")).to_have_attribute("aria-pressed", "true")
    wait_until(lambda: Message.objects.get(pk=reply.pk).data.get("feedback", {}).get("rating") == "up",
               what="the rating stored")
    expect(message_item(other, reply.pk).get_by_role("button", name="Good reply")).to_have_attribute(
        "aria-pressed", "true")
    item.get_by_role("button", name="Bad reply").click()
    wait_until(lambda: Message.objects.get(pk=reply.pk).data["feedback"]["rating"] == "down", what="the change")
    item.get_by_role("button", name="Bad reply").click()  # pressed again: taken back
    wait_until(lambda: "feedback" not in Message.objects.get(pk=reply.pk).data, what="the rating taken back")
    page.reload()
    expect(message_item(page, reply.pk).get_by_role("button", name="Bad reply")).to_have_attribute(
        "aria-pressed", "false")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_a_regenerated_answer_shows_only_its_own_tool_cards(user, open_page, viewport):
    from agents_app.models import Agent
    from agents_app.services import ensure_builtin_agents

    ensure_builtin_agents()
    librarian = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    chat = chat_with(user, librarian)
    page = open_page(user, f"/chats/{chat.pk}/", viewport=viewport)
    send(page, "list my chats")
    reply = wait_until(lambda: (r := reply_of(librarian, chat)) and r.status == "final" and r, what="the answer")
    item = message_item(page, reply.pk)
    cards = item.locator("details.log")
    expect(cards).to_have_count(1)
    item.hover()
    item.get_by_role("button", name="Regenerate").click()
    expect(item.locator(".version-count")).to_have_text("2/2", timeout=15_000)
    wait_until(lambda: Message.objects.get(pk=reply.pk).status == "final"
               and Message.objects.filter(reply_to=reply, kind="log").count() == 2, what="the second answer")
    expect(item).to_have_class(re.compile("status-final"))
    expect(cards).to_have_count(1)
    page.reload()
    item = message_item(page, reply.pk)
    expect(item.locator("details.log")).to_have_count(1)
    item.hover()
    item.get_by_role("button", name="Earlier version").click()
    expect(item.locator(".version-count")).to_have_text("1/2")
    expect(item.locator("details.log")).to_have_count(1)
