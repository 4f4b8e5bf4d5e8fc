"""A share link shows its snapshot and nothing else: no other chat, no other user, no notes or
memory unless chosen, no session or CSRF token, no socket; agent output in it is inert; it is not
indexed and sends no Referer; a revoked or guessed token is the same 404, reached the same way.

The browser checks open the page in Chromium with every request answered by this process's Django
(a Playwright route to the test client), so they need no running hub.
"""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from chats import memory, services
from tests.e2e.conftest import browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

STATIC_JS = Path(settings.BASE_DIR) / "static" / "js"
PAYLOAD = ('<script>window.__owned = 1</script><img src=x onerror="window.__owned = 2">'
           '[click](javascript:window.__owned=3) <iframe src="https://evil.example/"></iframe>'
           '<a href="https://evil.example/" onclick="window.__owned=4">link</a> <svg onload="window.__owned=5"></svg>')


@pytest.fixture
def shared(user, other_user, make_agent):
    """A chat of the user shared with a plain link, beside another chat of theirs and one of another
    user's, each with words that must never show on the shared page."""
    agent = make_agent(user, name="Oracle", avatar="🔮")
    chat = services.create_chat(owner=user, title="Shared trip", agents=[agent])
    services.send_message(chat=chat, content="Shall we go to Porto?")
    services.send_message(chat=chat, content=PAYLOAD, sender_agent=agent)
    services.send_message(chat=chat, content="NOTE-SECRET keep this to myself", kind="note")
    services.send_message(chat=chat, content="LOG-SECRET tool output", sender_agent=agent, kind="log", subkind="tool")
    memory.append(owner=user, text="MEMORY-SECRET lives at 12 Rose Lane")
    other = services.create_chat(owner=user, title="OTHER-CHAT-TITLE")
    services.send_message(chat=other, content="OTHER-CHAT-WORDS")
    theirs = services.create_chat(owner=other_user, title="OTHER-USER-TITLE")
    services.send_message(chat=theirs, content="OTHER-USER-WORDS")
    services.share_chat(chat=theirs)
    link = services.share_chat(chat=chat)
    return {"chat": chat, "other": other, "link": link, "url": f"/s/{link.token}/"}


def get(path, user=None):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get(path)


def test_the_page_shows_the_snapshot_and_nothing_else(shared, user, other_user):
    page = get(shared["url"])
    html = page.content.decode()
    assert page.status_code == 200
    assert "Shared trip" in html and "Shall we go to Porto?" in html and "Oracle" in html and "Shared on" in html
    for never in ("OTHER-CHAT-TITLE", "OTHER-CHAT-WORDS", "OTHER-USER-TITLE", "OTHER-USER-WORDS", "NOTE-SECRET",
                  "MEMORY-SECRET", "LOG-SECRET", user.username, other_user.username, str(shared["chat"].pk),
                  str(shared["other"].pk), "/chats/", "/api/", "/files/", "/memory/"):
        assert never not in html, never


def test_notes_and_memory_show_only_when_chosen(shared):
    chat = shared["chat"]
    notes = services.share_chat(chat=chat, include_notes=True)
    both = services.share_chat(chat=chat, include_notes=True, include_memory=True)
    with_notes = get(f"/s/{notes.token}/").content.decode()
    with_both = get(f"/s/{both.token}/").content.decode()
    assert "NOTE-SECRET" in with_notes and "MEMORY-SECRET" not in with_notes
    assert "NOTE-SECRET" in with_both and "MEMORY-SECRET" in with_both
    assert "LOG-SECRET" not in with_both and "OTHER-CHAT-WORDS" not in with_both


def test_no_session_csrf_token_or_socket_and_every_visitor_sees_the_same_page(shared, user, other_user):
    anonymous = get(shared["url"])
    stranger = get(shared["url"], other_user)
    owner = get(shared["url"], user)
    assert anonymous.content == stranger.content == owner.content
    for answer in (anonymous, stranger, owner):
        assert not answer.cookies, answer.cookies  # no session made, no CSRF cookie set
        assert "Cookie" not in answer.get("Vary", "")
    html = anonymous.content.decode()
    for never in ("csrf", "sessionid", "ws://", "wss://", "/ws/", "Log out", "sidebar"):
        assert never.lower() not in html.lower(), never
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
    assert scripts == ["/static/js/theme-init.js", "/static/js/shared.js"]
    assert "<script>" not in html.replace(" ", "")


def test_the_pages_script_cannot_reach_the_hub(shared):
    """The policy allows no connection at all, and the page's own modules open none."""
    policy = get(shared["url"])["Content-Security-Policy"]
    assert "connect-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    seen, queue = set(), ["shared.js"]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        source = (STATIC_JS / name).read_text()
        for never in ("fetch(", "WebSocket", "XMLHttpRequest", "EventSource", "sendBeacon", "Connection("):
            assert never not in source, f"{name} uses {never}"
        queue += re.findall(r'from "\./([\w-]+\.js)"', source)
    assert {"shared.js", "markdown.js", "ui.js", "richtext.js"} <= seen


def test_not_indexed_and_no_referrer(shared):
    for path in (shared["url"], "/s/guessed-token/"):
        answer = get(path)
        assert answer["X-Robots-Tag"] == "noindex, nofollow"
        assert answer["Referrer-Policy"] == "no-referrer"
        assert "no-store" in answer["Cache-Control"]
        html = answer.content.decode()
        assert '<meta name="robots" content="noindex, nofollow">' in html
        assert '<meta name="referrer" content="no-referrer">' in html


def test_revoked_guessed_and_malformed_tokens_are_the_same_404(shared, user, other_user):
    link = shared["link"]
    alive = services.share_chat(chat=shared["chat"])
    services.revoke_share(link=link)
    trashed_chat = services.create_chat(owner=user, title="Soon trashed")
    trashed = services.share_chat(chat=trashed_chat)
    services.delete_chat(chat=trashed_chat)
    paths = [f"/s/{link.token}/", f"/s/{trashed.token}/", "/s/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/",
             f"/s/{alive.token[:-1]}/", f"/s/{alive.token}x/", "/s/%27%20OR%201=1--/", f"/s/{'z' * 3000}/"]
    answers = [get(path, visitor) for path in paths for visitor in (None, other_user)]
    assert {a.status_code for a in answers} == {404}
    assert len({a.content for a in answers}) == 1
    assert len({tuple(sorted((k, v) for k, v in a.items() if k != "Content-Length")) for a in answers}) == 1
    assert "Soon trashed" not in answers[0].content.decode() and "Shared trip" not in answers[0].content.decode()
    assert get(f"/s/{alive.token}/").status_code == 200


def test_every_token_is_one_lookup_of_the_same_shape(shared):
    """A revoked, a guessed and a malformed token run the very same single query (its value aside):
    nothing answers sooner for a token that could not be one."""
    link = shared["link"]
    services.revoke_share(link=link)
    shapes = set()
    for token in (link.token, "guessed", "%00", "x" * 500, "ünïcode"):
        with CaptureQueriesContext(connection) as queries:
            assert get(f"/s/{token}/").status_code in (400, 404)
        statements = [q["sql"] for q in queries.captured_queries]
        if token == "%00":
            assert statements == []  # refused before any view, as every URL with NUL is (hub.middleware)
            continue
        assert len(statements) == 1, statements
        shapes.add(re.sub(r"'[^']*'", "?", statements[0]))
    assert len(shapes) == 1, shapes


def test_later_edits_and_deletions_do_not_change_the_page(shared):
    chat = shared["chat"]
    first = chat.messages.filter(kind="message").order_by("id").first()
    before = get(shared["url"]).content
    services.edit_message(message=first, content="Rewritten after sharing")
    services.send_message(chat=chat, content="Added after sharing")
    chat.messages.filter(pk=first.pk).delete()
    services.update_chat(chat=chat, title="Renamed after sharing")
    assert get(shared["url"]).content == before


# Committed: Playwright answers routes in a context of its own, on a connection of its own.
@pytest.mark.django_db(transaction=True)
def test_an_agents_script_or_html_is_inert_in_the_page(shared, browser):  # noqa: F811 (the fixture)
    """In Chromium: the payload renders as text and links, never as script, frames or images."""
    html = get(shared["url"]).content.decode()
    assert "<script>window.__owned" not in html and "<img src=x" not in html and "<iframe" not in html

    context = browser.new_context()
    blocked = []

    def answer(route):
        url = route.request.url
        if not url.startswith("http://share.test/"):
            blocked.append(url)  # nothing may be fetched from anywhere else
            return route.abort()
        response = Client().get(url.removeprefix("http://share.test"))
        body = b"".join(response.streaming_content) if response.streaming else response.content
        route.fulfill(status=response.status_code, body=body,
                      headers={k: v for k, v in response.items() if k.lower() != "content-length"})

    try:
        context.route("**/*", answer)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"http://share.test{shared['url']}")
        page.wait_for_selector("body.js-ready")
        reply = page.locator(".msg-agent .msg-content").first
        assert "window.__owned = 1" in reply.inner_text()
        assert page.evaluate("window.__owned") is None
        assert reply.locator("script, img, iframe, svg, [onerror], [onclick], [onload]").count() == 0
        assert page.locator(".msg-agent .msg-content a[href^='javascript']").count() == 0
        assert page.locator(".msg-agent .msg-content a").first.get_attribute("rel") == "noopener noreferrer nofollow"
        assert blocked == [] and errors == []
    finally:
        context.close()
