"""Threads, UI-first: New Thread is local until a message is sent; one thread open at a time;
the last thread is continued on opening only while it is fresh (ten minutes, by the page's clock)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from chats import services as chat_services
from chats.models import Message, Thread
from tests.e2e.helpers import chat_with, expected_reply, reply_of, scripted_agent, send, wait_until


def _old_thread(chat, title, text, *, hours=3):
    thread = Thread.objects.create(chat=chat, title=title)
    chat_services.send_message(chat=chat, content=text, thread=thread)
    then = timezone.now() - timedelta(hours=hours)
    Thread.objects.filter(pk=thread.pk).update(last_activity_at=then, created_at=then)
    Message.objects.filter(thread=thread).update(created_at=then)
    return thread


def test_new_thread_is_made_by_its_first_message_and_the_others_collapse(user, open_page, screenshot):
    chat = chat_with(user, title="Trip to Lisbon")
    _old_thread(chat, "Flights and dates", "Which dates work best for flights?")
    _old_thread(chat, "Museums", "Which museums open on Mondays?", hours=2)
    agent = scripted_agent(user, "Guide", "For {prompt}: Alfama and Baixa are both walkable.", avatar="🧭")
    chat_services.add_member(chat=chat, agent=agent)

    page = open_page(user, f"/chats/{chat.pk}/")
    # Nothing fresh: the chat opens in New Thread state, every thread a collapsed preview.
    expect(page.locator(".thread-active")).to_have_attribute("data-thread-key", "new")
    previews = page.locator(".thread-preview")
    expect(previews).to_have_count(2)
    expect(previews.nth(0)).to_contain_text("Flights and dates")
    expect(previews.nth(0)).to_contain_text("Which dates work best for flights?")
    expect(previews.nth(1)).to_contain_text("Museums")
    page.get_by_role("button", name="+ New thread").click()
    assert Thread.objects.filter(chat=chat).count() == 2  # New Thread is only local state

    send(page, "Where should we stay?")
    thread = wait_until(lambda: Thread.objects.filter(chat=chat, title="Where should we stay?").first(),
                        what="the thread")
    active = page.locator(".thread-active")
    expect(active).to_have_attribute("data-thread-key", str(thread.pk))
    expect(active.get_by_role("heading", level=2)).to_have_accessible_name("Where should we stay?")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    assert reply.thread_id == thread.pk
    expect(page.locator(".thread-active")).to_contain_text(expected_reply(agent, "Where should we stay?"))
    expect(page.locator(".thread-preview")).to_have_count(2)
    screenshot(page, "collapsed-threads")

    # Opening a preview makes it the one open thread; the one before collapses into a preview.
    page.locator(".thread-preview", has_text="Flights and dates").click()
    flights = Thread.objects.get(chat=chat, title="Flights and dates")
    expect(page.locator(".thread-active")).to_have_attribute("data-thread-key", str(flights.pk))
    expect(page.locator(".thread-active")).to_contain_text("Which dates work best for flights?")
    stay = page.locator(".thread-preview", has_text="Where should we stay?")
    expect(stay).to_contain_text("Guide: For Where should we stay?")
    expect(page.locator(".thread-preview")).to_have_count(2)
    expect(page.locator("#composer-input")).to_be_focused()

    # A message sent now goes into the open thread.
    send(page, "And the cheapest day?")
    wait_until(lambda: Message.objects.filter(thread=flights, content="And the cheapest day?").exists(), what="send")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_the_last_thread_is_continued_only_while_fresh(user, open_page, viewport):
    chat = chat_with(user, title="Fresh or not")
    thread = Thread.objects.create(chat=chat, title="Ongoing")
    chat_services.send_message(chat=chat, content="Which bike should I buy?", thread=thread)
    helper = scripted_agent(user, "Advisor", "unused")
    chat_services.send_message(chat=chat, content="The blue one is lighter.", thread=thread, sender_agent=helper)
    chat_services.send_message(chat=chat, content="We were just talking", thread=thread)
    chat_services.send_message(chat=chat, content="Then take the blue one, it fits the rack.", thread=thread,
                               sender_agent=helper)
    now = timezone.now()

    nine = open_page(user, f"/chats/{chat.pk}/", clock=now + timedelta(minutes=9), label="9 min later")
    expect(nine.locator(".thread-active")).to_have_attribute("data-thread-key", str(thread.pk))
    expect(nine.locator(".thread-active")).to_contain_text("We were just talking")
    expect(nine.locator(".thread-preview")).to_have_count(0)

    eleven = open_page(user, f"/chats/{chat.pk}/", clock=now + timedelta(minutes=11), label="11 min later",
                       viewport=viewport)
    expect(eleven.locator(".thread-active")).to_have_attribute("data-thread-key", "new")
    expect(eleven.locator(".thread-preview")).to_have_count(1)
    expect(eleven.locator(".thread-preview")).to_contain_text("Ongoing")
    # The last exchange, question and answer, so the conversation does not look gone.
    expect(eleven.locator(".thread-preview .preview-last")).to_have_text(
        ["You: We were just talking", "Advisor: Then take the blue one, it fits the rack."])
    expect(eleven.locator(".thread-active")).not_to_contain_text("We were just talking")
