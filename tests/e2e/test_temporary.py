"""A temporary chat as a person uses it: started with Ctrl+Shift+T, two agents answering, a reload
mid-stream, then "Save this chat" — and nothing in the database until then."""

import re

from playwright.sync_api import expect

from chats.models import Chat, Message
from tests.e2e.helpers import SLOW, agent_items, expected_reply, scripted_agent, send, wait_until

REPLY = "Off the record about {prompt}: " + "every word arrives once, in order. " * 3


def test_a_temporary_chat_streams_survives_a_reload_and_is_saved_with_everything(user, open_page, screenshot):
    alpha = scripted_agent(user, "Alpha", REPLY, pace=SLOW, avatar="🅰")
    beta = scripted_agent(user, "Beta", REPLY, pace=SLOW, avatar="🅱")
    page = open_page(user, "/")
    page.keyboard.press("Control+Shift+T")
    expect(page.locator("#temporary-toggle")).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#temporary-note")).to_contain_text("not stored in the database")
    for name in ("Alpha", "Beta"):
        pick = page.locator(".agent-pick", has_text=name)
        if pick.get_attribute("aria-pressed") != "true":
            pick.click()
    for pick in page.locator(".agent-pick[aria-pressed='true']").all():
        if not re.search("Alpha|Beta", pick.inner_text()):
            pick.click()  # only the two scripted agents answer
    screenshot(page, "temporary-chat-new")
    send(page, "quokkas")

    expect(page.locator("#chat-temporary")).to_contain_text(re.compile(r"Temporary · expires in 2[34] h"))
    chat_id = re.search(r"/chats/([0-9a-f-]+)/", page.url).group(1)
    expect(page.locator(f'a.dir-link[data-chat-id="{chat_id}"] .temporary-mark')).to_have_count(1)
    for name in ("Alpha", "Beta"):
        expect(agent_items(page, name).locator(".msg-content")).to_contain_text("every word", timeout=15_000)
    screenshot(page, "temporary-chat-streaming")
    assert not Chat.objects.filter(pk=chat_id).exists()
    assert not Message.objects.filter(content__contains="quokkas").exists()

    page.reload()  # mid-stream: the replies go on from where they were, without a gap or a repeat
    page.wait_for_selector("body.js-ready")
    expected = expected_reply(alpha, "quokkas")
    assert expected == expected_reply(beta, "quokkas")
    for name in ("Alpha", "Beta"):
        reply = agent_items(page, name)
        expect(reply).to_have_class(re.compile("status-final"), timeout=20_000)
        assert reply.locator(".msg-content").inner_text().strip() == expected.strip()
    assert not Message.objects.filter(content__contains="quokkas").exists()

    page.locator("#save-chat").click()
    expect(page.locator("#chat-temporary")).to_have_count(0)
    expect(page.locator(".toast", has_text="Saved")).to_have_count(1)
    saved = wait_until(lambda: Chat.objects.filter(pk=chat_id).first(), what="the saved chat")
    stored = list(Message.objects.filter(chat=saved, kind="message").order_by("id").values_list("content", flat=True))
    assert stored == ["quokkas", expected, expected]
    assert sorted(saved.memberships.values_list("agent__name", flat=True)) == ["Alpha", "Beta"]
    assert re.search(f"/chats/{chat_id}/$", page.url)
    for name in ("Alpha", "Beta"):
        assert agent_items(page, name).locator(".msg-content").inner_text().strip() == expected.strip()
    expect(page.locator(f'a.dir-link[data-chat-id="{chat_id}"]')).to_have_count(1)
    expect(page.locator(f'a.dir-link[data-chat-id="{chat_id}"] .temporary-mark')).to_have_count(0)
    screenshot(page, "temporary-chat-saved")
