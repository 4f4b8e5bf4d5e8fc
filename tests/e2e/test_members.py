"""The chat header's members, remotes attached to a thread as chips, and a failed reply's reason."""

import re

from playwright.sync_api import expect

from agents_app import remotes
from chats import services as chat_services
from chats.models import Membership, Message, Thread
from tests.e2e.helpers import chat_with, message_item, reply_of, scripted_agent, send, wait_until


def test_add_and_remove_an_agent_from_the_header(user, open_page):
    sage = scripted_agent(user, "Sage", "Sage here", avatar="🦉")
    chat = chat_with(user)
    page = open_page(user, f"/chats/{chat.pk}/")
    page.get_by_role("button", name="+ Add an agent").click()
    page.get_by_role("menuitem", name="Sage").click()
    member = page.get_by_role("button", name="Sage (agent)")
    expect(member).to_be_visible()
    wait_until(lambda: Membership.objects.filter(chat=chat, agent=sage).exists(), what="the membership")
    send(page, "hello there")
    wait_until(lambda: (r := reply_of(sage, chat)) and r.status == "final", what="Sage's answer")

    member.click()
    page.get_by_role("menuitem", name="Remove from chat").click()
    expect(page.get_by_role("button", name="Sage (agent)")).to_have_count(0)
    wait_until(lambda: not Membership.objects.filter(chat=chat, agent=sage).exists(), what="the removal")
    # Their message stays.
    expect(page.locator("li.msg-agent", has_text="Sage here")).to_have_count(1)


def test_a_remote_attached_to_a_thread_shows_as_a_chip(user, open_page):
    remote = remotes.create_remote(owner=user, name="Calendar tools", url="http://127.0.0.1:9/mcp",
                                   headers={"Authorization": "Bearer secret-value-never-shown"})
    chat = chat_with(user)
    thread = Thread.objects.create(chat=chat, title="Scheduling")
    chat_services.send_message(chat=chat, content="Find a slot", thread=thread)
    page = open_page(user, f"/chats/{chat.pk}/")
    page.get_by_role("button", name="Attach a remote").click()
    page.get_by_role("menuitem", name="Calendar tools").click()
    chip = page.locator(".thread-active .chip")
    expect(chip).to_have_text(re.compile("Calendar tools"))
    resource = wait_until(lambda: Message.objects.filter(chat=chat, kind="resource").first(), what="the resource")
    assert resource.thread_id == thread.pk and resource.data["remote_id"] == remote.pk
    assert "secret-value" not in page.content()

    # In New Thread state the remote waits as a chip and starts the thread with the first message.
    page.get_by_role("button", name="+ New thread").click()
    page.get_by_role("button", name="Attach a remote").click()
    page.get_by_role("menuitem", name="Calendar tools").click()
    expect(page.locator(".thread-active .chip-pending")).to_contain_text("Calendar tools")
    assert Thread.objects.filter(chat=chat).count() == 1
    send(page, "Book Friday lunch")
    new = wait_until(lambda: Thread.objects.filter(chat=chat).exclude(pk=thread.pk).first(), what="the new thread")
    kinds = wait_until(lambda: (k := list(new.messages.order_by("id").values_list("kind", flat=True))) == [
        "resource", "message"] and k, what="the remote, then the message")
    assert kinds == ["resource", "message"] and new.title == "Book Friday lunch"
    expect(page.locator(".thread-active")).to_have_attribute("data-thread-key", str(new.pk))
    expect(page.locator(".thread-active .chip")).to_have_text(re.compile("Calendar tools"))
    expect(page.locator(".thread-active .chip-pending")).to_have_count(0)


def test_a_failed_reply_says_why(user, open_page):
    agent = scripted_agent(user, "Flaky", "never sent", fail="The model provider is overloaded (503)")
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "are you there?")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "error" and r, what="the failure")
    item = message_item(page, reply.pk)
    expect(item).to_have_class(re.compile("state-failed"))
    expect(item.locator(".run-state")).to_have_text("Failed")
    expect(item.locator(".msg-note-line")).to_contain_text("overloaded (503)")
    expect(item.get_by_role("button", name="Regenerate")).to_be_visible()
