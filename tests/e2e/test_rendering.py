"""How replies read: highlighted code and typeset math, while streaming and after, in light and
dark, with the copy button kept and nothing of a reply's markup able to run."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.helpers import SLOW, chat_with, message_item, reply_of, scripted_agent, send, wait_until

REPLY = """Here is the function:

```python
def area(radius):
    # the area of a circle
    return 3.14159 * radius ** 2
```

So the area is $A = \\pi r^2$, and in general

$$
\\int_0^1 x^2 \\, dx = \\frac{1}{3}
$$

It costs $5 and $10 to print; \\(e^{i\\pi} + 1 = 0\\) also holds."""


@pytest.mark.parametrize("scheme, viewport", [("light", {"width": 1280, "height": 820}),
                                              ("dark", {"width": 1280, "height": 820}),
                                              ("dark", {"width": 390, "height": 800})],
                         ids=["light", "dark", "phone"])
def test_code_is_highlighted_and_math_typeset_as_a_reply_streams(user, open_page, screenshot, scheme, viewport):
    agent = scripted_agent(user, "Tutor", REPLY, pace=SLOW)
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", color_scheme=scheme, viewport=viewport)
    send(page, "Explain circles")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply to start")
    item = message_item(page, reply.pk)
    content = item.locator(".msg-content")

    # While it streams: the code block is coloured before the reply ends.
    expect(content.locator("code.hljs .hljs-keyword").first).to_have_text("def")
    expect(item).to_have_class(re.compile("status-streaming"))
    expect(item).to_have_class(re.compile("status-final"), timeout=20_000)

    expect(content.locator(".katex")).to_have_count(3)  # two inline formulas and the display
    expect(content.locator(".katex-display")).to_have_count(1)
    expect(content).to_contain_text("It costs $5 and $10 to print")  # money is not math
    expect(content.locator(".hljs-comment")).to_have_text("# the area of a circle")
    expect(content.locator(".hljs-string, .hljs-number").first).to_be_visible()
    colour = content.locator(".hljs-keyword").first.evaluate("el => getComputedStyle(el).color")
    plain = content.locator("p").first.evaluate("el => getComputedStyle(el).color")
    assert colour != plain, "keywords stand out from the text"

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    content.get_by_role("button", name="Copy code").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.strip() == "def area(radius):\n    # the area of a circle\n    return 3.14159 * radius ** 2"
    screenshot(page, f"rendering-{scheme}-{viewport['width']}")


def test_a_formula_cannot_link_or_run_anything(user, open_page):
    hostile = ("Click $\\href{javascript:window.__pwned='href'}{here}$ or "
               "$\\url{javascript:window.__pwned='url'}$ or $\\htmlId{x}{y}$ "
               "<img src=x onerror=\"window.__pwned='img'\">")
    agent = scripted_agent(user, "Mallory", hostile)
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "hi")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    content = message_item(page, reply.pk).locator(".msg-content")
    expect(content.locator(".katex").first).to_be_visible()
    assert content.locator("a[href^='javascript']").count() == 0
    assert content.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
