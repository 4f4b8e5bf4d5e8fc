"""Import and export as a person does it in Chromium: a ChatGPT export uploaded on the Import and
export page, its progress bar and summary, an imported message found by search, then everything
exported and downloaded; a file that is no export is named on the form."""

import json
import zipfile
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from chats.models import Chat
from chats.services import create_chat, send_message
from chats.transfers import jobs
from tests.chats import export_samples as samples
from tests.e2e.helpers import wait_until

COUNT = 60


def test_import_a_chatgpt_export_watch_it_find_it_and_export_everything(user, open_page, screenshot):
    conversations = samples.chatgpt_export(COUNT)
    conversations[16]["title"] = "Trip plan"
    conversations[16]["mapping"] = "broken"
    page = open_page(user, "/")
    page.get_by_role("link", name="Import and export").click()
    expect(page.get_by_role("heading", name="Import and export")).to_be_visible()
    expect(page.locator("#jobs-empty")).to_be_visible()  # nothing yet
    screenshot(page, "transfers-empty")

    page.locator("#import-form").get_by_label("Format").select_option("chatgpt")
    page.get_by_label("File", exact=True).set_input_files(files=[{
        "name": "chatgpt-export.zip", "mimeType": "application/zip", "buffer": samples.as_zip(conversations)}])
    page.evaluate("""() => {  // every state the job's line shows, as the user would see it go by
      window.seenStates = [];
      new MutationObserver(() => document.querySelectorAll(".transfer-job").forEach((job) => {
        const shown = [job.querySelector(".job-status")?.textContent, !!job.querySelector("progress")];
        window.seenStates.push(shown);
      })).observe(document.getElementById("transfer-jobs"), { childList: true, subtree: true });
    }""")
    page.get_by_role("button", name="Import", exact=True).click()
    job = page.locator(".transfer-job").first
    expect(job).to_contain_text("Import of chatgpt-export.zip")
    expect(job.locator(".job-status")).to_have_text("Done", timeout=30_000)
    expect(job).to_contain_text(f"Imported {COUNT - 1} chats, skipped 1.")
    seen = page.evaluate("window.seenStates")
    assert [text for text, bar in seen if bar][:1] == ["Waiting to start…"]  # a progress bar from the start
    assert all(bar == (text != "Done") for text, bar in seen)
    expect(job).to_contain_text('First skipped: conversation 17 ("Trip plan"): mapping is not an object')
    job.scroll_into_view_if_needed()
    screenshot(page, "transfers-import-done")
    assert Chat.objects.filter(owner=user, title__startswith="Conversation ").count() == COUNT - 1

    page.goto(page.url.split("/transfers/")[0] + "/")
    page.wait_for_selector("body.js-ready")
    page.get_by_label("Search chats").fill(samples.marker(42))
    hit = page.locator("a.dir-hit-link")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("Conversation 42 about")
    hit.click()
    expect(page.locator(".msg").first).to_contain_text(samples.marker(42))
    # Conversation 42 had its second answer regenerated in ChatGPT: the earlier answer is a version.
    earlier = next(n["message"]["content"]["parts"][0] for n in conversations[41]["mapping"].values()
                   if n["message"] and n["message"]["metadata"].get("model_slug") == "gpt-4o-mini")
    reply = page.locator("li.msg", has=page.locator(".version-count"))
    expect(reply.locator(".version-count")).to_have_text("2/2")
    reply.hover()  # a reply's actions show on hover
    reply.get_by_role("button", name="Earlier version").click()
    expect(reply.locator(".version-count")).to_have_text("1/2")
    expect(reply).to_contain_text(earlier)

    page.get_by_role("link", name="Import and export").click()
    page.get_by_label("Chats", exact=True).select_option("all")
    page.get_by_role("button", name="Export", exact=True).click()
    exported = page.locator(".transfer-job").first
    expect(exported).to_contain_text("Export of")
    link = exported.get_by_role("link", name="Download")
    expect(link).to_be_visible(timeout=30_000)
    expect(exported).to_contain_text(f"Exported {COUNT - 1 + 1} chats.")  # and the ChatGPT agent's own chat
    with page.expect_download() as download_info:
        link.click()
    path = download_info.value.path()
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert len(names) == COUNT
        first = json.loads(archive.read(names[0]))
    assert first["format"] == "hub.chat"
    exported.scroll_into_view_if_needed()
    screenshot(page, "transfers-export-done")


def test_a_file_that_is_no_export_is_named_on_the_form_and_progress_is_live(user, open_page, screenshot, console):
    console.allow(r"status of 400")  # the picture, refused on purpose
    chat = create_chat(owner=user, title="Garden")
    send_message(chat=chat, content="the roses need water")
    page = open_page(user, f"/chats/{chat.pk}/")
    page.get_by_label("Chat actions").click()
    page.get_by_role("menuitem", name="Export…").click()  # the chat's menu opens the page with it chosen
    expect(page.get_by_label("Chats", exact=True)).to_have_value(f"chat:{chat.pk}")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-file-error")).to_have_text("file: choose the export file to import")
    page.get_by_label("File", exact=True).set_input_files(files=[{
        "name": "holiday.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\n" + b"\0" * 64}])
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-file-error")).to_contain_text("is not an export")
    screenshot(page, "transfers-bad-file")

    page.locator("#export-form").get_by_label("Format").select_option("markdown")
    page.get_by_role("button", name="Export", exact=True).click()
    job = page.locator(".transfer-job").first
    expect(job.get_by_role("link", name="Download garden.md")).to_be_visible(timeout=30_000)
    with page.expect_download() as download_info:
        job.get_by_role("link", name="Download garden.md").click()
    assert "the roses need water" in open(download_info.value.path(), encoding="utf-8").read()

    # A second tab hears of a job started in the first.
    other = open_page(user, "/transfers/", viewport={"width": 390, "height": 844})  # a phone
    page.get_by_role("button", name="Export", exact=True).click()
    expect(other.locator(".transfer-job", has_text="garden.md")).to_have_count(2, timeout=15_000)
    other.locator(".transfer-job").first.scroll_into_view_if_needed()
    screenshot(other, "transfers-phone")
    wait_until(lambda: all(j.status == "done" for j in user.transfers.all()), what="the exports to finish")

    # An export's file is kept for HUB_EXPORT_KEEP_DAYS; once beat deletes it, the job says so.
    expect(page.locator(".transfer-job", has_text="garden.md").last).to_contain_text("kept until")
    user.transfers.filter(kind="export").update(finished_at=timezone.now() - timedelta(days=30))
    assert jobs.purge_expired_exports() == 2
    page.reload()
    oldest = page.locator(".transfer-job", has_text="garden.md").last
    expect(oldest).to_contain_text("Its file was deleted on")
    expect(oldest.get_by_role("link", name="Download garden.md")).to_have_count(0)
    oldest.scroll_into_view_if_needed()
    screenshot(page, "transfers-export-expired")
