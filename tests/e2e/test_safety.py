"""Agent output is untrusted: markup in a reply is shown, never run."""

import re

from playwright.sync_api import expect

from chats import services as chat_services
from tests.e2e.helpers import chat_with, message_item, reply_of, scripted_agent, send, wait_until

PAYLOAD = (
    "Look: <script>window.__pwned = 'script'</script>\n\n"
    '<img src="x" onerror="window.__pwned = \'onerror\'">\n\n'
    "[click me](javascript:window.__pwned='link') and ![pixel](http://127.0.0.1:9/track.png)\n\n"
    '<a href="#" onclick="window.__pwned = \'onclick\'">plain anchor</a>\n\n'
    '<svg onload="window.__pwned=\'svg\'"></svg>\n\n'
    "```html\n<script>alert(1)</script>\n```\n**still bold**"
)


def test_a_reply_with_script_and_onerror_payloads_is_inert(user, open_page):
    agent = scripted_agent(user, "Mallory", PAYLOAD)
    chat = chat_with(user, agent)
    chat_services.update_chat(chat=chat, title='<img src=x onerror="window.__pwned=\'title\'">')
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "show me")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    item = message_item(page, reply.pk)
    expect(item).to_have_class(re.compile("status-final"))
    content = item.locator(".msg-content")
    expect(content.locator("strong")).to_have_text("still bold")
    # The markup is there as text to read, not as elements.
    expect(content).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(content).to_contain_text("onerror=")
    assert content.locator("script, img, svg, iframe, [onerror], [onclick], [onload]").count() == 0
    hrefs = content.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not any(h and h.strip().lower().startswith("javascript:") for h in hrefs), hrefs
    # The image became a link: nothing was fetched from the URL an agent chose.
    expect(content.locator("a.image-link")).to_have_text("Image: pixel")
    for link in content.locator("a").all():
        assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    expect(content.locator(".code-block code")).to_have_text("<script>alert(1)</script>")
    # The chat's title is text in the header and the sidebar.
    expect(page.locator("#chat-title")).to_have_text('<img src=x onerror="window.__pwned=\'title\'">')
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#main img").count() == 0
