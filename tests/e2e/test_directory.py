"""The sidebar directory and the chat across tabs: rename, delete (with a notice), trash, search;
and a new user's first chat with the Librarian, in two threads."""

import re

import pytest
from playwright.sync_api import expect

from agents_app.services import ensure_builtin_agents
from chats.models import Chat, Thread
from tests.e2e.helpers import chat_with, reply_of, send, wait_until


def test_a_chat_made_while_the_home_page_connects_shows_in_its_sidebar(user, open_page):
    """The chat is made (in another tab) after the server drew the page and before its socket
    joined the user's group, so its event reaches no one: the sidebar reads the list again when
    its socket opens."""
    from chats import services

    page = open_page(user, "/")

    def create_then_connect(ws):
        services.create_chat(owner=user, title="Made meanwhile")
        ws.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/directory/"), create_then_connect)
    page.reload()
    expect(page.locator("#sidebar").get_by_role("link", name="Made meanwhile")).to_have_count(1)


def test_rename_and_delete_show_at_once_in_another_tab(user, open_page):
    chat = chat_with(user, title="Garden plans")
    other = chat_with(user, title="Reading list")
    tab_a = open_page(user, f"/chats/{chat.pk}/", label="A")
    tab_b = open_page(user, f"/chats/{chat.pk}/", label="B")

    tab_a.get_by_role("button", name="Chat actions").click()
    tab_a.get_by_role("menuitem", name="Rename and details…").click()
    dialog = tab_a.get_by_role("dialog")
    dialog.get_by_label("Title").fill("Vegetable garden")
    dialog.get_by_label("Description").fill("Beds, seeds and the shed")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_have_count(0)
    for tab in (tab_a, tab_b):
        expect(tab.locator("#chat-title")).to_have_text("Vegetable garden")
        expect(tab.locator(".chat-desc")).to_have_text("Beds, seeds and the shed")
        expect(tab.locator(f'a.dir-link[data-chat-id="{chat.pk}"] .dir-title')).to_have_text("Vegetable garden")

    # Delete from tab A's sidebar: A goes home, B is told and can no longer write.
    row = tab_a.locator(f'li.dir-item[data-chat-id="{chat.pk}"]')
    row.hover()
    row.get_by_role("button", name="Actions for Vegetable garden").click()
    tab_a.get_by_role("menuitem", name="Delete").click()
    expect(tab_a.locator(".toast")).to_contain_text("Moved “Vegetable garden” to the trash")
    expect(tab_b.locator(".chat-notice")).to_contain_text("This chat was deleted")
    expect(tab_b.locator("#composer-input")).to_be_disabled()
    for tab in (tab_a, tab_b):
        expect(tab.locator(f'a.dir-link[data-chat-id="{chat.pk}"]')).to_have_count(0)
        expect(tab.locator(f'a.dir-link[data-chat-id="{other.pk}"]')).to_have_count(1)
    assert Chat.objects.get(pk=chat.pk).deleted_at is not None

    # The trash lists it; restoring brings it back in both tabs.
    tab_a.get_by_role("button", name="Trash").click()
    tab_a.get_by_role("button", name="Restore Vegetable garden").click()
    expect(tab_a.locator(".toast").last).to_contain_text("Restored")
    wait_until(lambda: Chat.objects.get(pk=chat.pk).deleted_at is None, what="the restore")
    tab_a.get_by_role("button", name="Trash").click()
    for tab in (tab_a, tab_b):
        expect(tab.locator(f'a.dir-link[data-chat-id="{chat.pk}"]')).to_have_count(1)


def test_search_narrows_the_directory(user, open_page):
    for title in ("Trip to Lisbon", "Tax return", "Lisbon restaurants", "Garden"):
        chat_with(user, title=title)
    page = open_page(user, "/")
    expect(page.locator("a.dir-link")).to_have_count(4)
    page.get_by_label("Search chats").fill("lisbon")
    expect(page.locator("a.dir-link")).to_have_count(2)
    page.get_by_label("Search chats").press("Escape")
    expect(page.locator("a.dir-link")).to_have_count(4)


def test_a_new_user_talks_to_the_librarian_in_two_threads(user, open_page, screenshot):
    ensure_builtin_agents()
    page = open_page(user, "/")
    expect(page.get_by_role("heading", name="What shall we work on, ada?")).to_be_visible()
    expect(page.locator(".agent-pick", has_text="Librarian")).to_have_attribute("aria-pressed", "true")
    screenshot(page, "empty-hub")

    # A suggestion fills the composer; Enter sends it, and only then is the chat made.
    page.get_by_role("button", name="List my chats").click()
    expect(page.locator("#composer-input")).to_have_value("List my chats")
    assert not Chat.objects.filter(owner=user).exists()
    page.locator("#composer-input").press("Enter")
    chat = wait_until(lambda: Chat.objects.filter(owner=user).first(), what="the chat")
    expect(page).to_have_url(re.compile(f"/chats/{chat.pk}/$"))
    librarian = chat.memberships.get().agent
    first = wait_until(lambda: (r := reply_of(librarian, chat)) and r.status == "final" and r, what="an answer")
    expect(page.locator(f'li[data-message-id="{first.pk}"] .msg-content')).not_to_be_empty()

    page.get_by_role("button", name="+ New thread").click()
    expect(page.locator(".thread-active")).to_have_attribute("data-thread-key", "new")
    expect(page.locator(".thread-preview")).to_have_count(1)
    send(page, "Remember that I water them at 7.")
    wait_until(lambda: Thread.objects.filter(chat=chat).count() == 2, what="the second thread")
    second = wait_until(lambda: (r := reply_of(librarian, chat)) and r.pk != first.pk and r.status == "final" and r,
                        what="the second answer")
    expect(page.locator(f'li[data-message-id="{second.pk}"]')).to_be_visible()
    expect(page.locator(".thread-preview")).to_have_count(1)
    expect(page.locator(".thread-preview")).to_contain_text("List my chats")
    expect(page.locator(f'a.dir-link[data-chat-id="{chat.pk}"]')).to_have_attribute("aria-current", "page")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_search_finds_messages_and_opens_the_chat_at_one(user, open_page, screenshot, viewport):
    from chats import services as chat_services

    soup = chat_with(user, title="Dinner ideas")
    chat_services.send_message(chat=soup, content="Miso soup with tofu on Friday")
    chat_with(user, title="Groceries")
    notes = chat_with(user, title="Kitchen notes")
    thread = Thread.objects.create(chat=notes, title="Pantry")
    target = chat_services.send_message(chat=notes, thread=thread, content="Keep the white miso in the fridge")
    for n in range(120):  # the hit is far back: opening it loads older pages
        chat_services.send_message(chat=notes, thread=thread, content=f"Later note {n}")
    page = open_page(user, "/", viewport=viewport)
    if viewport["width"] < 700:
        page.get_by_role("button", name="Show chats").first.click()
    search = page.get_by_label("Search chats")
    search.fill("miso")
    hits = page.locator("a.dir-hit-link")
    expect(hits).to_have_count(2)
    expect(page.locator("li.dir-empty")).to_have_count(0)
    expect(hits.filter(has_text="Kitchen notes").locator("mark")).to_have_text("miso")
    screenshot(page, f"search-{viewport['width']}")
    page.emulate_media(color_scheme="dark")
    screenshot(page, f"search-{viewport['width']}-dark")
    page.emulate_media(color_scheme="light")

    search.press("ArrowDown")  # the keyboard reaches the hits
    expect(hits.first).to_be_focused()
    hits.filter(has_text="Kitchen notes").click()
    expect(page).to_have_url(re.compile(f"/chats/{notes.pk}/#message-{target.pk}$"))
    item = page.locator(f'li[data-message-id="{target.pk}"]')
    expect(item).to_have_class(re.compile("flash"))
    expect(item).to_be_in_viewport()
    expect(page.locator("#active-thread-title")).to_contain_text("Pantry")

    search_again = page.get_by_label("Search chats")
    if viewport["width"] < 700:
        page.get_by_role("button", name="Show chats").first.click()
    search_again.fill("nothing like this")
    expect(page.locator("li.dir-empty")).to_have_text("Nothing matches “nothing like this”.")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
@pytest.mark.parametrize("path", ["/memory/", "/agents/", "/settings/tokens/"])
def test_the_other_pages_keep_the_chat_sidebar(user, open_page, viewport, path):
    chat = chat_with(user, title="Trip to Lisbon")
    page = open_page(user, path, viewport=viewport)
    link = page.locator("#sidebar").get_by_role("link", name="Trip to Lisbon")
    if viewport["width"] < 700:
        expect(link).not_to_be_in_viewport()
        page.get_by_role("button", name="Show chats").click()
    expect(link).to_be_in_viewport()
    link.click()
    expect(page).to_have_url(re.compile(f"/chats/{chat.pk}/$"))


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_a_librarian_chat_gets_a_real_title_and_its_links_open_the_message(user, open_page, viewport):
    from chats import services as chat_services

    ensure_builtin_agents()
    pantry = chat_with(user, title="Pantry")
    said = chat_services.send_message(chat=pantry, content="Buy **white miso** and kombu")
    page = open_page(user, "/", viewport=viewport)
    page.locator("#composer-input").fill("What did I say about *miso*?")
    page.locator("#composer-input").press("Enter")
    chat = wait_until(lambda: Chat.objects.filter(owner=user).exclude(pk=pantry.pk).first(), what="the chat")
    librarian = chat.memberships.get().agent
    wait_until(lambda: (r := reply_of(librarian, chat)) and r.status == "final", what="the answer")
    # Titled from the first message, without its Markdown, in the header and the sidebar.
    expect(page.locator("#chat-title")).to_have_text("What did I say about miso?", timeout=15_000)
    if viewport["width"] < 700:
        page.get_by_role("button", name="Show chats").first.click()
    expect(page.locator(f'a.dir-link[data-chat-id="{chat.pk}"] .dir-title')).to_have_text("What did I say about miso?")
    if viewport["width"] < 700:
        page.keyboard.press("Escape")

    page.locator(".msg-agent .msg-content").get_by_role("link", name="Pantry").click()
    expect(page).to_have_url(re.compile(f"/chats/{pantry.pk}/#message-{said.pk}$"))
    expect(page.locator(f'li[data-message-id="{said.pk}"]')).to_have_class(re.compile("flash"))


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 820}, {"width": 390, "height": 800}],
                         ids=["desktop", "phone"])
def test_the_librarian_keeps_a_note_finds_words_on_different_lines_and_lists_plain_previews(
        user, open_page, viewport):
    from chats import memory
    from chats import services as chat_services

    ensure_builtin_agents()
    pantry = chat_with(user, title="Pantry")
    chat_services.send_message(chat=pantry, content="Shopping:\n- **white miso**\n- soup bones")
    page = open_page(user, "/", viewport=viewport)
    box = page.locator("#composer-input")
    box.fill("Note that the boiler is serviced in May")
    box.press("Enter")
    chat = wait_until(lambda: Chat.objects.filter(owner=user).exclude(pk=pantry.pk).first(), what="the chat")
    librarian = chat.memberships.get().agent
    expect(page.locator(".msg-agent .msg-content").last).to_have_text(
        "I'll remember that: the boiler is serviced in May")
    assert memory.get_block(owner=user, label="memory").content == "the boiler is serviced in May"

    send(page, "What did I say about the miso and the soup?")
    answer = page.locator(".msg-agent .msg-content").last
    expect(answer.get_by_role("link", name="Pantry")).to_be_visible()
    send(page, "list my chats")
    expect(page.locator(".msg-agent .msg-content").last).to_contain_text("Shopping: white miso soup bones")
    expect(page.locator(".msg-agent .msg-content").last).not_to_contain_text("**")
    # The page shows the whole text as it streams in; the reply is stored final just after.
    wait_until(lambda: reply_of(librarian, chat).status == "final", what="the last answer stored final")
