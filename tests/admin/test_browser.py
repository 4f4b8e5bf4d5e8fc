"""The admin in a real Chromium: a support person logs in, finds the failed reply, reads its
timeline, retries it, and repairs a stuck one from the repair page. Screenshots of each page go
to HUB_ADMIN_SCREENSHOTS (a directory) when it is set.

Marked needs_postgres so CI runs it once (with the PostgreSQL pass), like tests/e2e.
"""

import os
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from agents_app.models import Run
from chats import services
from chats.models import Message
from tests.admin.conftest import lose_lease, start_streaming

pytestmark = [pytest.mark.e2e, pytest.mark.needs_postgres, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def outside(fn, *args, **kwargs):
    """Call fn in a thread of its own: Playwright's event loop in this one makes the services'
    broadcasts (async_to_sync) refuse to run here."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def body():
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(body).result()


@pytest.fixture
def page(live_server):
    from tests.conftest import require_service

    require_service("Chromium", os.path.exists(CHROMIUM), "apt-get install chromium")
    # Playwright's sync API runs an event loop in this thread; the test's ORM calls are plain sync.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        tab = context.new_page()
        tab.set_default_timeout(10_000)
        tab.base = live_server.url
        errors = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        yield tab
        browser.close()
    assert errors == [], "errors in the browser"


def shot(tab, name: str) -> None:
    directory = os.environ.get("HUB_ADMIN_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=True)


def test_support_finds_a_failed_reply_reads_its_timeline_retries_it_and_repairs_a_stuck_one(
        page, staff, user, scripted_agent, run_now):
    agent = outside(scripted_agent, name="Researcher", fail="upstream timed out")
    trigger = outside(services.send_message, chat=agent.main_chat, content="Summarise the pelican paper")
    outside(run_now)
    failed = Run.objects.get(trigger_message=trigger)
    helper = outside(scripted_agent, name="Scribe", reply="Noted.", tools=[("record_effect", {"key": "k"})])
    remembered = outside(services.send_message, chat=helper.main_chat, content="Remember this")
    outside(run_now)
    asked = outside(services.send_message, chat=helper.main_chat, content="And this?")
    stuck = Run.objects.get(trigger_message=asked)
    token, reply = outside(start_streaming, stuck, "Half an answer")
    lose_lease(stuck)
    Run.objects.filter(pk=stuck.pk).update(status="failed", finished_at=timezone.now())  # a crash left it so

    # Log in through the site's log-in page (the admin sends visitors there).
    page.goto(page.base + "/admin/")
    assert "/login/" in page.url
    page.fill("input[name=username]", "support")
    page.fill("input[name=password]", "pass-for-tests-1")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/admin/")
    expect(page.get_by_role("link", name="Health").first).to_be_visible()
    shot(page, "01-index")

    page.click("text=Failed runs (24 h)")
    page.wait_for_url("**attention=failed_today")
    shot(page, "02-failed-runs")
    row = page.locator("#result_list tbody tr", has_text="upstream timed out")
    expect(row).to_have_count(1)
    shot(page, "02-failed-runs")
    row.get_by_role("link", name="timeline").click()
    expect(page.locator(".hub-verdict", has_text="upstream timed out")).to_be_visible()
    shot(page, "03-timeline")

    page.goto(page.base + f"/admin/agents_app/run/{failed.pk}/change/")
    shot(page, "04-run")
    # The provider is back; retry from the run's page (with its confirmation).
    from agents_app import services as agent_services

    agent_services.update_agent(agent=agent, settings={"script": {"reply": "Here is the summary."}})
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Retry").click()
    expect(page.locator(".messagelist", has_text="queued to answer again")).to_be_visible()
    shot(page, "05-retried")
    assert outside(run_now) == ["succeeded"]
    assert Message.objects.get(pk=failed.reply_message_id).content == "Here is the summary."

    page.goto(page.base + "/admin/repair/")
    shot(page, "06-repair-checks")
    page.get_by_role("button", name="Check now").click()
    expect(page.locator("caption", has_text="Streaming messages with no live run")).to_be_visible()
    expect(page.locator("td", has_text=f"message {reply.pk}")).to_be_visible()
    shot(page, "06-repair-found")
    page.get_by_role("button", name="Fix the ticked checks").click()
    expect(page.locator(".hub-verdict", has_text="1 fixed, 0 left")).to_be_visible()
    shot(page, "07-repaired")
    reply.refresh_from_db()
    assert reply.status == "interrupted" and reply.content == "Half an answer"

    page.goto(page.base + "/admin/health/")
    expect(page.locator("caption", has_text="Workers")).to_be_visible()
    shot(page, "08-health")
    page.goto(page.base + f"/admin/chats/chat/{helper.main_chat_id}/change/")
    shot(page, "09-chat")
    page.goto(page.base + "/admin/chats/message/?q=remember")
    shot(page, "10-messages")
    page.goto(page.base + f"/admin/agents_app/run/{Run.objects.get(trigger_message=remembered).pk}/timeline/")
    expect(page.locator("td", has_text="record_effect")).to_be_visible()
    expect(page.locator("pre", has_text="recorded k")).to_be_visible()
    shot(page, "11-timeline-with-a-tool-step")


def test_an_ordinary_user_in_the_browser_sees_no_admin(page, user):
    page.goto(page.base + "/login/?next=/admin/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "pass-for-tests-1")
    page.click("button[type=submit], input[type=submit]")
    response = page.goto(page.base + "/admin/")
    assert response.status == 404
    assert "administration" not in page.content().lower()
