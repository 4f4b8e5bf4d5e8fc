"""The page through network faults: a real TCP proxy between Chromium and the hub drops the
websocket mid-stream, refuses connections, or loses a frame on the way."""

import re

from playwright.sync_api import expect

from chats.models import Message
from tests.e2e.helpers import chat_with, expected_reply, message_item, reply_of, scripted_agent, send, wait_until

# What Chromium logs for connections the proxy refuses or cuts (the faults these tests make).
REFUSED = (r"WebSocket connection to .* failed"
           r"|Failed to load resource: net::ERR_(SOCKET_NOT_CONNECTED|CONNECTION_\w+|EMPTY_RESPONSE)")
LONG = "Resumed: {prompt}. " + "No gap and no repeat after the socket drops. " * 8


def test_a_dropped_socket_mid_stream_ends_with_the_exact_text(user, open_page, proxy, console):
    console.allow(REFUSED)
    agent = scripted_agent(user, "Slow", LONG, pace={"chunk": 3, "delay": 0.04})
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", base=proxy.base)
    send(page, "keep going")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    item = message_item(page, reply.pk)
    expect(item.locator(".msg-content")).to_contain_text("No gap")

    proxy.block()
    assert proxy.cut() >= 1
    expect(page.locator(".conn-status")).to_contain_text("Offline")
    shown_offline = len(item.locator(".msg-content").inner_text())
    page.wait_for_timeout(800)  # the worker streams on meanwhile; the page hears nothing
    proxy.block(False)

    expect(page.locator(".conn-status")).to_be_empty(timeout=15_000)
    expect(item).to_have_class(re.compile("status-final"), timeout=15_000)
    text = expected_reply(agent, "keep going")
    assert item.locator(".msg-content").inner_text().strip() == text.strip()
    assert shown_offline < len(text)
    expect(page.locator(f'li[data-message-id="{reply.pk}"]')).to_have_count(1)
    expect(page.locator("li.msg-user", has_text="keep going")).to_have_count(1)


def test_sending_while_offline_waits_for_the_connection(user, open_page, proxy, console, screenshot):
    console.allow(REFUSED)
    chat = chat_with(user)
    page = open_page(user, f"/chats/{chat.pk}/", base=proxy.base)
    expect(page.locator(".conn-status")).to_be_empty()
    proxy.block()
    proxy.cut()
    expect(page.locator(".conn-status")).to_contain_text("Offline")
    send(page, "written on a train")
    pending = page.locator("li.msg.pending")
    expect(pending).to_contain_text("Waiting for the connection")
    screenshot(page, "offline-waiting")
    page.wait_for_timeout(500)
    assert not Message.objects.filter(chat=chat).exists()

    proxy.block(False)
    stored = wait_until(lambda: Message.objects.filter(chat=chat, content="written on a train").first(),
                        timeout=20, what="the held message to be sent")
    expect(message_item(page, stored.pk)).not_to_have_class(re.compile("pending"))
    expect(page.locator("li.msg-user", has_text="written on a train")).to_have_count(1)
    assert Message.objects.filter(chat=chat).count() == 1


def test_a_send_lost_with_the_socket_is_offered_again(user, open_page, proxy, console, screenshot):
    console.allow(REFUSED)
    chat = chat_with(user)
    page = open_page(user, f"/chats/{chat.pk}/", base=proxy.base)
    expect(page.locator(".conn-status")).to_be_empty()  # connected: a send is written, not held
    proxy.freeze()  # bytes stop moving: the frame the page writes never arrives
    send(page, "lost words")
    page.wait_for_timeout(300)
    proxy.block()
    proxy.cut()
    proxy.freeze(False)
    expect(page.locator(".conn-status")).to_contain_text("Offline")
    proxy.block(False)

    failed = page.locator("li.msg.pending-failed")
    expect(failed).to_contain_text("connection dropped before the hub confirmed it", timeout=15_000)
    assert not Message.objects.filter(chat=chat).exists()
    screenshot(page, "lost-send-retry")
    failed.get_by_role("button", name="Retry").click()
    stored = wait_until(lambda: Message.objects.filter(chat=chat, content="lost words").first(), what="the retry")
    expect(message_item(page, stored.pk)).to_be_visible()
    expect(page.locator("li.msg.pending")).to_have_count(0)
    assert Message.objects.filter(chat=chat).count() == 1


def test_a_worker_killed_mid_reply_shows_interrupted_then_recovered(user, open_page, hub):
    agent = scripted_agent(user, "Durable", LONG, pace={"chunk": 3, "delay": 0.05})
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "survive this")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    item = message_item(page, reply.pk)
    expect(item.locator(".msg-content")).to_contain_text("No gap and no repeat")
    worker = hub.live_workers()[0]
    hub.kill_and_replace(worker)  # SIGKILL mid-stream; the new worker's start-up sweep recovers the turn

    expect(item.locator(".run-state")).to_have_text(re.compile("Interrupted|Recovered"), timeout=30_000)
    expect(item).to_have_class(re.compile("status-final"), timeout=30_000)
    expect(item.locator(".run-state")).to_have_text("Recovered")
    assert item.locator(".msg-content").inner_text().strip() == expected_reply(agent, "survive this").strip()
    expect(page.locator(f'li[data-message-id="{reply.pk}"]')).to_have_count(1)
    hub.wait_all_ready()
