"""The composer: Enter and Shift+Enter, note mode, editing, @mentions, and the length limit."""

import re

import pytest
from playwright.sync_api import expect

from agents_app.models import Run
from chats.models import Message
from tests.e2e.conftest import MESSAGE_LIMIT
from tests.e2e.helpers import agent_items, chat_with, message_item, reply_of, scripted_agent, send, wait_until


def test_enter_sends_and_shift_enter_breaks_the_line(user, open_page):
    chat = chat_with(user)
    page = open_page(user, f"/chats/{chat.pk}/")
    box = page.locator("#composer-input")
    box.type("line one")
    box.press("Shift+Enter")
    box.type("line two")
    assert Message.objects.filter(chat=chat).count() == 0
    box.press("Enter")
    stored = wait_until(lambda: Message.objects.filter(chat=chat).first(), what="the message")
    assert stored.content == "line one\nline two"
    expect(box).to_have_value("")


def test_note_mode_writes_an_annotation_nobody_answers(user, open_page):
    agent = scripted_agent(user, "Scribe", "Reply to {prompt}")
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "Start the thread")
    wait_until(lambda: reply_of(agent, chat), what="the first reply")

    note_mode = page.get_by_role("button", name="Note mode")
    note_mode.click()
    expect(note_mode).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#composer")).to_have_class(re.compile("note-mode"))
    send(page, "Budget is 150 a night")
    note = wait_until(lambda: Message.objects.filter(chat=chat, kind="note").first(), what="the note")
    item = message_item(page, note.pk)
    expect(item).to_have_class(re.compile("kind-note"))
    expect(item.locator(".note-label")).to_have_text("Note")
    assert note.thread_id == Message.objects.get(chat=chat, content="Start the thread").thread_id
    # Back to normal mode after one note; no agent answers a note.
    expect(note_mode).to_have_attribute("aria-pressed", "false")
    page.wait_for_timeout(500)
    assert not Run.objects.filter(trigger_message=note).exists()
    # Alt+N toggles note mode from the keyboard.
    page.locator("#composer-input").press("Alt+n")
    expect(page.locator("#composer")).to_have_class(re.compile("note-mode"))


def test_editing_a_message_changes_it_in_every_tab(user, open_page):
    chat = chat_with(user)
    tab_a = open_page(user, f"/chats/{chat.pk}/", label="A")
    send(tab_a, "Meet on Tuesday")
    stored = wait_until(lambda: Message.objects.filter(chat=chat).first(), what="the message")
    tab_b = open_page(user, f"/chats/{chat.pk}/", label="B")
    expect(message_item(tab_b, stored.pk)).to_contain_text("Meet on Tuesday")

    item = message_item(tab_a, stored.pk)
    item.hover()
    item.get_by_role("button", name="Edit").click()
    expect(tab_a.locator(".composer-banner")).to_contain_text("Editing")
    box = tab_a.locator("#composer-input")
    expect(box).to_have_value("Meet on Tuesday")
    box.fill("Meet on Wednesday")
    box.press("Enter")
    for tab in (tab_a, tab_b):
        expect(message_item(tab, stored.pk).locator(".msg-content")).to_have_text("Meet on Wednesday")
        expect(message_item(tab, stored.pk).locator(".edited")).to_have_text("edited")
    wait_until(lambda: Message.objects.get(pk=stored.pk).content == "Meet on Wednesday", what="the stored edit")
    assert Message.objects.get(pk=stored.pk).edited_at is not None
    # Escape leaves edit mode and gives back what was being typed before.
    box.fill("a draft")
    item.hover()
    item.get_by_role("button", name="Edit").click()
    box.press("Escape")
    expect(box).to_have_value("a draft")


def test_mentions_complete_member_agents(user, open_page):
    sage = scripted_agent(user, "Sage", "Sage says hi", reply_policy="mentioned", avatar="🦉")
    scribe = scripted_agent(user, "Scribe", "Scribe says hi", reply_policy="mentioned")
    chat = chat_with(user, sage, scribe)
    page = open_page(user, f"/chats/{chat.pk}/")
    box = page.locator("#composer-input")
    box.type("Hello @S")
    options = page.get_by_role("option")
    expect(options).to_have_count(2)
    box.type("a")
    expect(options).to_have_count(1)
    expect(options.first).to_contain_text("Sage")
    box.press("Enter")  # picks the agent, does not send
    expect(box).to_have_value("Hello @Sage ")
    box.type("what do you think?")
    box.press("Enter")
    wait_until(lambda: (r := reply_of(sage, chat)) and r.status == "final", what="Sage's reply")
    expect(agent_items(page, "Sage")).to_have_count(1)
    page.wait_for_timeout(300)
    assert reply_of(scribe, chat) is None


def test_too_long_is_told_before_sending_and_a_refusal_loses_nothing(user, open_page):
    chat = chat_with(user)
    page = open_page(user, f"/chats/{chat.pk}/")
    box = page.locator("#composer-input")
    text = "x" * (MESSAGE_LIMIT + 1)
    box.fill(text)
    expect(page.locator("#composer-count")).to_contain_text(f"{MESSAGE_LIMIT + 1:,} / {MESSAGE_LIMIT:,}")
    expect(page.locator("#composer-error")).to_contain_text("Too long to send: 1 character over")
    box.press("Enter")
    page.wait_for_timeout(300)
    assert Message.objects.count() == 0
    expect(box).to_have_value(text)

    # Were the page's check out of step with the hub, the hub's refusal keeps the text too.
    page.evaluate("window.hub.limits.message_chars = 1e9")
    box.fill(text + "y")
    box.press("Enter")
    failed = page.locator("li.msg.pending-failed")
    expect(failed).to_contain_text(f"Not sent: at most {MESSAGE_LIMIT} characters")
    failed.get_by_role("button", name="Edit").click()
    expect(box).to_have_value(text + "y")
    expect(page.locator("li.msg.pending")).to_have_count(0)
    assert Message.objects.count() == 0


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_a_mention_singles_out_who_answers_and_the_composer_says_so(user, open_page, viewport):
    alpha = scripted_agent(user, "Alpha", "Alpha here")
    beta = scripted_agent(user, "Beta", "Beta here")
    chat = chat_with(user, alpha, beta)
    page = open_page(user, f"/chats/{chat.pk}/", viewport=viewport)
    answering = page.locator("#composer-answering")
    expect(answering).to_have_text("· Alpha, Beta answer")
    box = page.locator("#composer-input")
    box.fill("@beta what do you think?")
    expect(answering).to_have_text("· Beta answers")
    box.press("Enter")
    wait_until(lambda: (r := reply_of(beta, chat)) and r.status == "final", what="Beta's reply")
    expect(agent_items(page, "Beta")).to_have_count(1)
    page.wait_for_timeout(300)
    assert reply_of(alpha, chat) is None and not Run.objects.filter(agent=alpha).exists()
    expect(answering).to_have_text("· Alpha, Beta answer")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_save_and_submit_has_the_agent_answer_the_edit_and_keeps_the_old_answer(user, open_page, viewport):
    agent = scripted_agent(user, "Echo", "You asked: {prompt}")
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", viewport=viewport)
    send(page, "What is two and two?")
    question = wait_until(lambda: Message.objects.filter(chat=chat, sender_agent__isnull=True).first(), what="it")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the answer")
    answer = message_item(page, reply.pk).locator(".msg-content")
    expect(answer).to_have_text("You asked: What is two and two?")

    item = message_item(page, question.pk)
    item.hover()
    item.get_by_role("button", name="Edit").click()
    box = page.locator("#composer-input")
    box.fill("What is three and three?")
    page.get_by_role("button", name="Save & submit").click()
    expect(answer).to_have_text("You asked: What is three and three?", timeout=15_000)
    expect(message_item(page, reply.pk).locator(".version-count")).to_have_text("2/2")
    message_item(page, reply.pk).hover()
    page.get_by_role("button", name="Earlier version").click()
    expect(answer).to_have_text("You asked: What is two and two?")
    assert Message.objects.filter(chat=chat, sender_agent=agent, kind="message").count() == 1  # the same reply
    assert Message.objects.get(pk=question.pk).content == "What is three and three?"

    # Save alone changes the words and asks nobody again.
    item.hover()
    item.get_by_role("button", name="Edit").click()
    expect(page.get_by_role("button", name="Save & submit")).to_be_visible()
    box.fill("What is four and four?")
    box.press("Enter")
    wait_until(lambda: Message.objects.get(pk=question.pk).content == "What is four and four?", what="the edit")
    page.wait_for_timeout(400)
    assert Run.objects.filter(agent=agent).count() == 2
    expect(page.get_by_role("button", name="Save & submit")).to_be_hidden()
