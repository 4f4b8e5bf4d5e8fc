"""Phone width, the dark theme and the keyboard: screenshots of the main states, every control
named, everything reachable with Tab."""

from playwright.sync_api import expect

from chats import services as chat_services
from chats.models import Thread
from tests.e2e.helpers import chat_with, reply_of, scripted_agent, send, wait_until

UNNAMED_CONTROLS = """() => [...document.querySelectorAll(
    'button, a[href], input, textarea, select, [role=option], [role=menuitem]')]
  .filter(el => el.offsetParent !== null)
  .filter(el => {
    const labelled = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')
      || (el.labels && el.labels.length) || el.textContent.trim() || el.getAttribute('title');
    return !labelled;
  }).map(el => el.outerHTML.slice(0, 120))"""


def _busy_chat(user):
    agent = scripted_agent(user, "Scribe", "**Plan for {prompt}**\n\n1. Book the flights\n2. Pick a hotel\n\n"
                           "```python\nbudget = 150 * 4\n```", avatar="🪶")
    chat = chat_with(user, title="Trip to Lisbon")
    chat_services.update_chat(chat=chat, description="Planning the October trip", picture="🧳")
    older = Thread.objects.create(chat=chat, title="Flights and dates")
    chat_services.send_message(chat=chat, content="Which dates are cheapest?", thread=older)
    chat_services.add_member(chat=chat, agent=agent)
    return chat, agent


def test_phone_width_and_dark_theme(user, open_page, screenshot):
    chat, agent = _busy_chat(user)
    page = open_page(user, f"/chats/{chat.pk}/", viewport={"width": 390, "height": 844}, color_scheme="dark",
                     has_touch=True, is_mobile=True)
    page.get_by_role("button", name="+ New thread").click()
    send(page, "four days")
    wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final", what="the reply")
    expect(page.locator(".msg-agent .msg-content")).to_contain_text("Book the flights")
    # Nothing wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    screenshot(page, "phone-dark")
    page.get_by_role("button", name="Show chats").click()
    expect(page.locator("#sidebar")).to_be_in_viewport()
    expect(page.locator("#directory-search")).to_be_focused()
    screenshot(page, "phone-sidebar")
    page.keyboard.press("Escape")
    expect(page.locator("#sidebar")).not_to_be_in_viewport()

    desktop = open_page(user, f"/chats/{chat.pk}/", color_scheme="dark", label="desktop")
    expect(desktop.locator(".thread-preview")).to_have_count(1)
    screenshot(desktop, "dark")
    # The theme switch overrides the system's and is remembered.
    desktop.locator("#theme-toggle").click()  # system -> light
    assert desktop.evaluate("document.documentElement.dataset.theme") == "light"
    desktop.reload()
    assert desktop.evaluate("document.documentElement.dataset.theme") == "light"


def test_every_control_is_named_and_reachable_by_keyboard(user, open_page):
    chat, agent = _busy_chat(user)
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "a week")
    wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final", what="the reply")
    expect(page.locator(".msg-agent")).to_have_count(1)
    assert page.evaluate(UNNAMED_CONTROLS) == []

    # The skip link is the first stop of Tab, shows when focused, and leads to the message box.
    first = page.evaluate("""() => [...document.querySelectorAll('a[href], button, input, textarea')]
      .find(el => el.tabIndex >= 0 && !el.disabled).textContent.trim()""")
    assert first == "Skip to the message box"
    skip = page.get_by_role("link", name="Skip to the message box")
    skip.focus()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#composer-input")).to_be_focused()

    # Every action is reachable with Tab (a message's actions show while focus is inside it).
    reached = set()
    page.locator("#directory-search").focus()
    for _ in range(60):
        page.keyboard.press("Tab")
        reached.add(page.evaluate(
            "document.activeElement.getAttribute('aria-label') || document.activeElement.textContent.trim()"))
    for name in ("Chat actions", "Copy", "Regenerate", "+ New thread", "Send", "Scribe (agent)"):
        assert name in reached, (name, sorted(n for n in reached if n))

    # Keyboard shortcuts: Ctrl+K searches, Ctrl+Shift+O starts a new chat.
    page.keyboard.press("Control+k")
    expect(page.locator("#directory-search")).to_be_focused()
    page.keyboard.press("Control+Shift+O")
    expect(page.get_by_role("heading", name="What shall we work on, ada?")).to_be_visible()
