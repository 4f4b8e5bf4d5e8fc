"""The chat page when no worker runs and when the database goes away, in Chromium.

This module has a hub of its own (overriding the package's `hub` here only, so open_page serves
from it): Daphne with no worker at all, reaching the test database and Redis through TCP proxies
the tests cut (tests/api/outages.py). A reply nobody takes says it is waiting for a worker; a
send while the database is down says it was not sent, keeps its text and goes through on Retry;
a page while the database is down says so and loads by itself once it is back.
"""

import re
import time

import pytest
from playwright.sync_api import expect

from agents_app.models import Run
from chats.models import Message
from tests.api.outages import hub_with_outages
from tests.e2e.helpers import chat_with, expected_reply, message_item, scripted_agent, send, wait_until

DATABASE_DOWN = "Hub can't reach its database right now, so nothing was saved. Try again in a moment."


@pytest.fixture(scope="module")
def hub(django_db_setup, django_db_blocker, tmp_path_factory):
    """Daphne alone (no worker) for this module; .base, .database, .redis and .cluster."""
    from django.conf import settings

    if not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")):
        pytest.skip("the hub under test needs PostgreSQL and Redis")
    with hub_with_outages(tmp_path_factory.mktemp("no-worker-hub")) as outage_hub:
        yield outage_hub


def connected(page):
    """The page once its socket is open and its first catch-up read is done (both read the
    database: a test that takes it away waits for them)."""
    expect(page.locator(".conn-status")).to_have_attribute("data-state", "open")
    page.wait_for_load_state("networkidle")
    return page


@pytest.fixture(autouse=True)
def _services_up(hub):
    hub.all_up()
    yield
    hub.all_up()


def test_a_reply_no_worker_takes_says_it_waits_for_a_worker_until_one_starts(hub, user, open_page, screenshot):
    agent = scripted_agent(user, "Scribe", "Hello {prompt}, nice to meet you.")
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/")
    state = page.locator("li.ghost .run-state")

    send(page, "anyone there?")
    sent_at = time.monotonic()

    expect(state).to_have_text("Waiting to start…")
    expect(state).to_have_text("Waiting for a worker…", timeout=10_000)
    assert time.monotonic() - sent_at >= 4.5, "it said so before the run had waited five seconds"
    expect(state).to_have_attribute("title", re.compile("starts as soon as one is running; nothing is lost"))
    expect(state).to_have_class(re.compile("run-waiting"))
    screenshot(page, "no-worker-waiting")
    run = Run.objects.get(chat=chat)
    assert run.status == Run.Status.QUEUED

    [worker] = hub.cluster.start_workers(1)
    try:
        reply = wait_until(lambda: Message.objects.filter(chat=chat, sender_agent=agent, status="final").first(),
                           timeout=60, what="the worker to answer")
        expect(page.locator("li.ghost")).to_have_count(0)
        expect(message_item(page, reply.pk)).to_contain_text(expected_reply(agent, "anyone there?"))
    finally:
        worker.stop()


def test_a_send_while_the_database_is_down_is_not_sent_keeps_its_text_and_goes_through_on_retry(
        hub, user, open_page):
    chat = chat_with(user)
    page = connected(open_page(user, f"/chats/{chat.pk}/"))
    hub.database.down()

    send(page, "ping while the database is down")

    failed = page.locator("li.pending-failed")
    expect(failed).to_contain_text(f"Not sent: {DATABASE_DOWN}")
    expect(failed.locator(".msg-content")).to_have_text("ping while the database is down")
    assert not Message.objects.filter(chat=chat).exists()
    hub.database.up()
    failed.get_by_role("button", name="Retry").click()

    stored = wait_until(lambda: Message.objects.filter(chat=chat).first(), what="the message to be stored")
    expect(message_item(page, stored.pk)).to_contain_text("ping while the database is down")
    expect(page.locator("li.pending")).to_have_count(0)
    assert Message.objects.filter(chat=chat).count() == 1


def test_a_page_while_the_database_is_down_says_so_and_loads_by_itself_once_it_is_back(
        hub, user, open_page, console, screenshot):
    console.allow(r"status of 503")  # the page itself answered 503, on purpose
    page = connected(open_page(user, f"/chats/{chat_with(user).pk}/"))
    hub.database.down()

    page.goto(f"{hub.base}/agents/")

    expect(page.locator("h1")).to_have_text("Hub can't reach its database right now")
    expect(page.locator("main")).to_contain_text("This page tries again in 5 seconds.")
    screenshot(page, "database-down-page")
    hub.database.up()
    expect(page).not_to_have_title(re.compile("can't reach"), timeout=15_000)
    expect(page.locator("h1")).not_to_have_text("Hub can't reach its database right now")
