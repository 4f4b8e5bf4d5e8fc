"""Keeping chats in order from the sidebar: pins and the archive (live in every tab, one click to
restore), folders (by drag, by menu, with instructions, renamed and deleted), the tag filter, and
"Branch from here" on a message."""

from playwright.sync_api import expect

from chats import services
from chats.models import Chat, Folder, Message
from tests.e2e.helpers import chat_with, scripted_agent, send, wait_until


def row(page, chat):
    return page.locator(f'li.dir-item[data-chat-id="{chat.pk}"]')


def chat_menu(page, chat, item: str):
    target = row(page, chat)
    target.hover()
    target.get_by_role("button", name=f"Actions for {chat.title}").click()
    page.get_by_role("menuitem", name=item).click()


def listed_titles(page):
    return page.locator("#directory a.dir-link .dir-title")


def test_a_pinned_chat_heads_every_tab_and_an_archived_one_restores_in_one_click(user, open_page, screenshot):
    older = chat_with(user, title="Tax return")
    services.send_message(chat=older, content="the receipts from the plumber")
    newer = chat_with(user, title="Garden plans")
    tab_a = open_page(user, "/", label="A")
    tab_b = open_page(user, "/", label="B")
    expect(listed_titles(tab_a)).to_have_text(["Garden plans", "Tax return"])

    chat_menu(tab_a, older, "Pin")
    for tab in (tab_a, tab_b):
        expect(listed_titles(tab)).to_have_text(["Pinned: Tax return", "Garden plans"])
        expect(tab.locator("#directory .dir-group").first).to_have_text("Pinned")
    screenshot(tab_a, "organize-pinned")

    # Archived: out of the list in both tabs, still found by the sidebar's search.
    chat_menu(tab_a, older, "Archive")
    expect(tab_a.locator(".toast").last).to_contain_text("Archived “Tax return”")
    for tab in (tab_a, tab_b):
        expect(listed_titles(tab)).to_have_text(["Garden plans"])
    assert Chat.objects.get(pk=older.pk).archived_at is not None
    tab_b.get_by_label("Search chats").fill("plumber")
    expect(tab_b.locator("a.dir-hit-link")).to_have_count(1)
    expect(tab_b.locator("a.dir-hit-link .dir-title")).to_have_text("Tax return")
    tab_b.get_by_label("Search chats").fill("")

    tab_a.get_by_role("button", name="Archive", exact=True).click()
    expect(tab_a.locator(".directory-heading")).to_contain_text("Archive")
    expect(listed_titles(tab_a)).to_have_text(["Tax return"])
    screenshot(tab_a, "organize-archive")
    tab_a.get_by_role("button", name="Restore Tax return from the archive").click()
    expect(tab_a.locator(".dir-empty")).to_contain_text("No archived chats")
    wait_until(lambda: Chat.objects.get(pk=older.pk).archived_at is None, what="the restore")
    tab_a.get_by_role("button", name="Archive", exact=True).click()
    for tab in (tab_a, tab_b):
        expect(listed_titles(tab)).to_have_text(["Garden plans", "Tax return"])
    assert newer.pk


def test_folders_by_drag_and_by_menu_with_instructions_rename_and_delete(user, open_page, console, screenshot):
    console.allow(r"status of 400")  # the empty name, refused on purpose
    trip = chat_with(user, title="Trip to Lisbon")
    hotels = chat_with(user, title="Hotels")
    other = chat_with(user, title="Groceries")
    page = open_page(user, f"/chats/{trip.pk}/")
    second = open_page(user, "/", label="second")
    expect(page.locator(".folder-empty")).to_contain_text("No folders yet")

    page.get_by_role("button", name="+ New folder").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Name").fill("   ")
    dialog.get_by_role("button", name="Create").click()
    expect(dialog.locator(".field-error")).to_have_text("may not be empty")
    dialog.get_by_label("Name").fill("Travel")
    dialog.get_by_role("button", name="Create").click()
    expect(dialog).to_have_count(0)
    folder = Folder.objects.get(owner=user, name="Travel")
    for tab in (page, second):
        expect(tab.locator(".folder-item .folder-name")).to_have_text(["Travel"])

    # Drag a chat onto the folder; move another with its menu (keyboard and touch).
    row(page, trip).drag_to(page.locator(f'li.folder-item[data-folder-id="{folder.pk}"]'))
    expect(page.locator(".toast").last).to_contain_text("Moved “Trip to Lisbon” to Travel")
    chat_menu(page, hotels, "Move to folder…")
    page.get_by_role("menuitem", name="Travel").click()
    wait_until(lambda: set(folder.chats.values_list("title", flat=True)) == {"Trip to Lisbon", "Hotels"},
               what="both chats in the folder")

    # Opening the folder keeps its chats, in this tab and as another tab sees them live.
    for tab in (page, second):
        tab.get_by_role("button", name="Travel", exact=True).click()
        expect(tab.locator(".directory-heading")).to_contain_text("Travel")
        expect(listed_titles(tab)).to_have_text(["Hotels", "Trip to Lisbon"])
    screenshot(page, "organize-folder")

    # Its instructions, in a dialog.
    folder_row = page.locator(f'li.folder-item[data-folder-id="{folder.pk}"]')
    folder_row.hover()
    folder_row.get_by_role("button", name="Actions for the folder Travel").click()
    page.get_by_role("menuitem", name="Instructions…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Every agent in this folder's chats reads these").fill("Prices in euros, please.")
    screenshot(page, "organize-folder-instructions")
    dialog.get_by_role("button", name="Save").click()
    expect(dialog).to_have_count(0)
    wait_until(lambda: Folder.objects.get(pk=folder.pk).instructions == "Prices in euros, please.",
               what="the instructions")
    expect(page.locator(".directory-heading")).to_contain_text("with instructions")

    # Renamed, then deleted: the chats stay, in no folder, and the list shows every chat again.
    folder_row.hover()
    folder_row.get_by_role("button", name="Actions for the folder Travel").click()
    page.get_by_role("menuitem", name="Rename").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Name").fill("Holidays")
    dialog.get_by_role("button", name="Save").click()
    for tab in (page, second):
        expect(tab.locator(".folder-item .folder-name")).to_have_text(["Holidays"])
    page.once("dialog", lambda confirm: confirm.accept())
    folder_row.hover()
    folder_row.get_by_role("button", name="Actions for the folder Holidays").click()
    page.get_by_role("menuitem", name="Delete folder").click()
    for tab in (page, second):
        expect(tab.locator(".folder-empty")).to_be_visible()
        expect(listed_titles(tab)).to_have_count(3)
    assert Chat.objects.filter(pk__in=[trip.pk, hotels.pk, other.pk], folder__isnull=True,
                               deleted_at__isnull=True).count() == 3


def test_tags_show_on_rows_and_filter_the_list(user, open_page, console, screenshot):
    console.allow(r"status of 400")  # the empty tag, refused on purpose
    work = chat_with(user, title="Quarterly report")
    chat_with(user, title="Birthday party")
    page = open_page(user, "/")

    chat_menu(page, work, "Add tag…")
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Tag").fill("   ")
    dialog.get_by_role("button", name="Add tag").click()
    expect(dialog.locator(".field-error")).to_have_text("may not be empty")
    dialog.get_by_label("Tag").fill("  work  ")
    dialog.get_by_role("button", name="Add tag").click()
    expect(dialog).to_have_count(0)
    expect(row(page, work).locator(".dir-tag")).to_have_text(["work"])

    row(page, work).get_by_role("button", name="work").click()
    expect(page.locator(".directory-heading")).to_contain_text("Tag: work")
    expect(listed_titles(page)).to_have_text(["Quarterly report"])
    screenshot(page, "organize-tag-filter")

    # Taking the tag off while the filter shows it: the chat leaves the filtered list.
    chat_menu(page, work, "Remove tag “work”")
    expect(page.locator(".dir-empty")).to_contain_text("No chats tagged “work”")
    page.get_by_role("button", name="Done").click()
    expect(listed_titles(page)).to_have_count(2)
    assert not Chat.objects.get(pk=work.pk).tags.exists()


def test_branch_from_here_opens_a_new_chat_with_everything_up_to_the_message(user, open_page, screenshot):
    helper = scripted_agent(user, "Helper", "Noted: {prompt}")
    chat = chat_with(user, helper, title="Menu ideas")
    page = open_page(user, f"/chats/{chat.pk}/")
    send(page, "soup first")
    wait_until(lambda: Message.objects.filter(chat=chat, sender_agent=helper, status="final").count() == 1,
               what="the first reply")
    send(page, "then a salad")
    wait_until(lambda: Message.objects.filter(chat=chat, sender_agent=helper, status="final").count() == 2,
               what="the second reply")
    first_reply = Message.objects.filter(chat=chat, sender_agent=helper).order_by("id").first()

    item = page.locator(f'li[data-message-id="{first_reply.pk}"]')
    expect(item).to_contain_text("Noted: soup first")
    item.hover()
    item.get_by_role("button", name="Branch from here").click()
    expect(page.locator(".toast").last).to_contain_text("Branched into “Menu ideas (branch)”")
    fork = wait_until(lambda: Chat.objects.filter(forked_from=chat).first(), what="the branch")
    expect(page).to_have_url(f"{page.url.split('/chats/')[0]}/chats/{fork.pk}/")
    expect(page.locator("#chat-title")).to_have_text("Menu ideas (branch)")
    expect(page.locator("#conversation")).to_contain_text("Noted: soup first")
    expect(page.locator("#conversation")).not_to_contain_text("then a salad")
    screenshot(page, "organize-branch")
    assert list(fork.messages.filter(kind="message").values_list("content", flat=True)) == [
        "soup first", "Noted: soup first"]


def test_at_phone_width_a_long_tagged_row_keeps_its_menu_beside_it(user, open_page, screenshot):
    folder = services.create_folder(owner=user, name="A folder with a rather long name for a phone")
    chat = services.organize_chat(
        chat=chat_with(user, title="A very long title that could never fit on a phone's narrow sidebar at all"),
        folder=folder, tags=["one", "two", "three"], pinned=True)
    page = open_page(user, "/", viewport={"width": 390, "height": 800})
    page.get_by_role("button", name="Show chats").click()
    wait_until(lambda: page.locator("#sidebar").bounding_box()["x"] >= 0, what="the sidebar to slide in")
    item = row(page, chat)
    expect(item.locator(".dir-tag")).to_have_text(["one", "three", "two"])
    link, menu = item.locator("a.dir-link").bounding_box(), item.locator(".dir-menu").bounding_box()
    assert menu["y"] < link["y"] + link["height"] and menu["x"] >= link["x"] + link["width"] - 1  # beside, not below
    assert item.locator(".dir-tags").bounding_box()["y"] > link["y"] + link["height"] / 2  # tags under the link
    screenshot(page, "organize-phone")
