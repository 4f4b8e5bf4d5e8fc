"""Share links in the browser: Share from the chat's header, open the link where nobody is logged
in, read the conversation as it was, revoke it, and the link is a 404."""

import re

import pytest
from playwright.sync_api import expect

from chats import services
from chats.models import ShareLink
from tests.e2e.helpers import chat_with, message_item, reply_of, scripted_agent, send, wait_until

# Recorded before any script of the page runs (as tests/security/test_csp.py does).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.effectiveDirective} blocked ${event.blockedURI || "inline"}`);
}, true);
"""


def stranger_page(browser, console, **options):
    """A fresh browser context with no session: how the person the link was sent to opens it."""
    context = browser.new_context(viewport=options.pop("viewport", {"width": 1280, "height": 820}), **options)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(10_000)
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    console.attach(page, "stranger")
    return context, page, sockets


def test_share_open_without_a_login_and_revoke(user, open_page, browser, hub, console, screenshot):
    agent = scripted_agent(user, "Guide", "**Lisbon** in spring: `pastéis` and trams.\n\n- Alfama\n- Belém")
    chat = chat_with(user, agent, title="Trip ideas")
    page = open_page(user, f"/chats/{chat.pk}/")
    page.context.add_init_script(RECORD_VIOLATIONS)
    page.reload()
    page.wait_for_selector("body.js-ready")
    send(page, "Where should we go?")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    expect(message_item(page, reply.pk)).to_have_class(re.compile("status-final"))
    services.send_message(chat=chat, content="A private note", kind="note")

    page.locator("#share-chat").click()
    dialog = page.locator("#share-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("#share-links-state")).to_have_text("No links to this chat yet.")
    dialog.locator("#share-create").click()
    field = dialog.locator("#share-new-url")
    expect(field).to_have_value(re.compile(r"/s/[\w-]{40,}/$"))
    link = ShareLink.objects.get(chat=chat)
    url = field.input_value()
    assert url == f"{hub.base}/s/{link.token}/" and not link.include_notes
    expect(dialog.locator(".share-row")).to_have_count(1)
    assert page.evaluate("window.__cspViolations") == []
    screenshot(page, "share-dialog")

    # Said after the link was made: not in the snapshot.
    dialog.locator("button", has_text="Close").click()
    send(page, "A later question")
    wait_until(lambda: chat.messages.filter(content="A later question").exists(), what="the later message")

    context, shared, sockets = stranger_page(browser, console)
    try:
        answer = shared.goto(url)
        assert answer.status == 200 and answer.headers["x-robots-tag"] == "noindex, nofollow"
        assert answer.headers["referrer-policy"] == "no-referrer"
        shared.wait_for_selector("body.js-ready")
        expect(shared.locator("h1")).to_have_text("Trip ideas")
        expect(shared.locator(".shared-when")).to_contain_text("Shared on")
        expect(shared.locator(".msg-user .msg-content")).to_have_text("Where should we go?")
        expect(shared.locator(".msg-agent .msg-sender")).to_have_text("Guide")
        expect(shared.locator(".msg-agent .msg-content strong")).to_have_text("Lisbon")
        expect(shared.locator(".msg-agent .msg-content li")).to_have_count(2)
        expect(shared.locator("body")).not_to_contain_text("A later question")
        expect(shared.locator("body")).not_to_contain_text("A private note")
        expect(shared.locator("body")).not_to_contain_text(user.username)
        shared.wait_for_load_state("networkidle")
        assert sockets == [] and shared.evaluate("window.__cspViolations") == []
        assert context.cookies() == []  # no session, no CSRF cookie given to the visitor
        screenshot(shared, "share-page-desktop")

        # The owner revokes it from the dialog; the visitor's next look is a 404.
        console.allow(r"stranger console: Failed to load resource: .* 404")
        page.locator("#share-chat").click()
        row = page.locator("#share-dialog .share-row")
        expect(row).to_have_count(1)
        row.locator(".share-revoke").click()
        expect(page.locator("#share-dialog #share-links-state")).to_have_text("No links to this chat yet.")
        wait_until(lambda: ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=False).exists(), what="revoked")
        gone = shared.goto(url)
        assert gone.status == 404
        expect(shared.locator("h1")).to_have_text("Not found")
        expect(shared.locator("body")).not_to_contain_text("Trip ideas")
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_shared_page_reads_well_on_a_phone_and_a_desktop(user, browser, hub, console, screenshot, scheme):
    agent = scripted_agent(user, "Chef", "")
    chat = chat_with(user, title="A long recipe for a rainy weekend with friends")  # no member: nobody answers
    services.send_message(chat=chat, content="How do I make *bread*?")
    services.send_message(chat=chat, sender_agent=agent, content=(
        "## Bread\n\nMix **500 g** flour, water and salt.\n\n```python\nprint('knead ' * 3)\n```\n\n"
        "| Step | Minutes |\n|---|---|\n| Rise | 60 |\n| Bake | 35 |\n\nA very long word: " + "x" * 120))
    services.send_message(chat=chat, content="And for a side?", new_thread_title="Sides")
    link = services.share_chat(chat=chat)
    for name, viewport in (("phone", {"width": 390, "height": 844}), ("desktop", {"width": 1280, "height": 820})):
        context, page, sockets = stranger_page(browser, console, viewport=viewport, color_scheme=scheme)
        try:
            page.goto(f"{hub.base}/s/{link.token}/")
            page.wait_for_selector("body.js-ready")
            expect(page.locator(".shared-thread-title")).to_have_text(["Main thread", "Sides"])
            expect(page.locator(".msg-agent .code-block")).to_have_count(1)
            page.wait_for_load_state("networkidle")
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {name} width"
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert (background == "rgb(22, 23, 27)") == (scheme == "dark"), background
            assert sockets == [] and page.evaluate("window.__cspViolations") == []
            screenshot(page, f"share-page-{name}-{scheme}")
        finally:
            context.close()


def test_the_shared_links_page_lists_and_revokes(user, open_page, screenshot):
    chats = [chat_with(user, title=title) for title in ("Budget", "Garden")]
    links = [services.share_chat(chat=chat) for chat in chats]
    page = open_page(user, "/")
    page.context.add_init_script(RECORD_VIOLATIONS)
    page.locator(".sidebar-foot a", has_text="Shared links").click()
    rows = page.locator(".share-row")
    expect(rows).to_have_count(2)
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__cspViolations") == []
    expect(rows.first.locator(".share-chat")).to_have_text("Garden")
    screenshot(page, "shared-links-page")
    # A link made in another tab shows here without a reload.
    services.share_chat(chat=chats[0])
    expect(rows).to_have_count(3)
    page.locator(".share-row", has_text="Garden").locator("button", has_text="Revoke").click()
    expect(page.locator(".messages-flash")).to_contain_text("Revoked the link to “Garden”")
    expect(rows).to_have_count(2)
    assert ShareLink.objects.get(pk=links[1].pk).revoked_at is not None
    assert ShareLink.objects.get(pk=links[0].pk).revoked_at is None
    services.revoke_share(link=links[0])
    services.revoke_share(link=ShareLink.objects.filter(revoked_at__isnull=True).get())
    expect(page.locator(".empty")).to_contain_text("You are not sharing any chat")


def test_a_link_revoked_while_the_shared_links_page_connects_is_gone_from_it(user, open_page):
    """The revoke lands after the server drew the page and before its socket joined the user's
    group, so its event reaches no one: the page reads the list again when its socket opens."""
    links = [services.share_chat(chat=chat_with(user, title=title)) for title in ("Budget", "Garden")]
    page = open_page(user, "/")

    def revoke_then_connect(ws):
        services.revoke_share(link=links[0])
        ws.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/directory/"), revoke_then_connect)
    page.locator(".sidebar-foot a", has_text="Shared links").click()
    rows = page.locator(".share-row")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".share-chat")).to_have_text("Garden")


def test_sharing_with_notes_at_phone_width(user, open_page, screenshot):
    chat = chat_with(user, title="Phone share")
    services.send_message(chat=chat, content="Hello from a phone")
    services.send_message(chat=chat, content="Remember the keys", kind="note")
    page = open_page(user, f"/chats/{chat.pk}/", viewport={"width": 390, "height": 844})
    share = page.locator("#share-chat")
    expect(share).to_be_visible()
    share.click()
    dialog = page.locator("#share-dialog")
    dialog.locator("#share-notes").check()
    dialog.locator("#share-create").click()
    expect(dialog.locator(".share-row")).to_have_count(1)
    expect(dialog.locator(".share-row")).to_contain_text("with notes")
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    screenshot(page, "share-dialog-phone")
    link = ShareLink.objects.get(chat=chat)
    assert link.include_notes and not link.include_memory
    page.goto(f"{page.url.split('/chats/')[0]}/s/{link.token}/")
    expect(page.locator(".kind-note .msg-content")).to_have_text("Remember the keys")
