"""Files as a person uses them in Chromium: a PDF picked with the paper-clip, an image dropped on
the chat, both sent with a message; the PDF's card says when it was read; the image opens large."""

import io
import re

from PIL import Image
from playwright.sync_api import expect

from chats.models import Attachment, Message
from tests.chats.test_reading import pdf_with_pages
from tests.e2e.helpers import chat_with, send, wait_until


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 40), (40, 120, 200)).save(out, format="PNG")
    return out.getvalue()


def test_a_pdf_and_a_dropped_image_are_sent_read_and_shown(user, open_page, screenshot):
    from agents_app.models import Agent
    from agents_app.services import ensure_builtin_agents

    ensure_builtin_agents()  # made by a migration; the browser tests' flushes remove it
    librarian = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    chat = chat_with(user, title="Flat hunting")
    page = open_page(user, f"/chats/{chat.pk}/")
    page.set_input_files("#file-picker", files=[{
        "name": "lease.pdf", "mimeType": "application/pdf",
        "buffer": pdf_with_pages(["The flat has two rooms."] * 2 + ["Small pets are allowed."])}])
    drop = page.evaluate_handle("""(bytes) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([new Uint8Array(bytes)], "balcony.png", { type: "image/png" }));
      return transfer;
    }""", list(png_bytes()))
    page.dispatch_event("#conversation", "drop", {"dataTransfer": drop})

    chips = page.locator(".file-chip")
    expect(chips).to_have_count(2)
    expect(chips.filter(has_text="lease.pdf")).to_contain_text(re.compile(r"waiting to be read|reading|read"))
    expect(chips.filter(has_text="balcony.png").locator("img.file-thumb")).to_have_count(1)
    screenshot(page, "files-in-the-composer")
    send(page, "Here is the lease and the balcony")
    if page.locator(".file-chip.file-uploading").count():  # sent too soon: the composer says so, keeps all
        expect(page.locator("#composer-error")).to_contain_text("still uploading")
        expect(page.locator(".file-chip.file-done")).to_have_count(2)
        page.locator("#composer-input").press("Enter")

    message = page.locator("li.msg-user", has_text="Here is the lease")
    expect(message.locator(".msg-image img")).to_have_attribute("alt", "balcony.png")
    card = message.locator(".file-card", has_text="lease.pdf")
    expect(card).to_contain_text("read · 3 pages", timeout=20_000)
    expect(page.locator(".file-chip")).to_have_count(0)
    stored = wait_until(lambda: Message.objects.filter(chat=chat, content__startswith="Here is").first(),
                        what="the stored message")
    assert sorted(stored.files.values_list("name", flat=True)) == ["balcony.png", "lease.pdf"]
    assert Attachment.objects.get(name="lease.pdf").text_status == "read"

    # The image is shown by its own download address, and opens large.
    expect(message.locator(".msg-image img")).to_have_js_property("naturalWidth", 64)
    message.locator(".msg-image").click()
    expect(page.locator("dialog.image-view img")).to_be_visible()
    screenshot(page, "files-image-open")
    page.keyboard.press("Escape")
    expect(page.locator("dialog.image-view")).to_have_count(0)
    assert card.get_attribute("href").endswith("?download=1")
    screenshot(page, "files-sent")

    # The Librarian, offline, answers from the PDF's text with a link to the file.
    from chats.services import add_member

    add_member(chat=chat, agent=librarian)
    send(page, "What does the lease say about pets?")
    answer = page.locator("li.msg-agent", has_text="Here is what your files say")
    expect(answer).to_contain_text("Small pets are allowed", timeout=20_000)
    link = answer.locator("a", has_text="lease.pdf")
    expect(link).to_have_attribute("href", re.compile(r"^/files/[0-9a-f-]+/$"))
    expect(answer).to_contain_text("page 3")
    screenshot(page, "files-librarian")
