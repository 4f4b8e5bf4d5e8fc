"""Usage in the browser: a reply shows its model and tokens on hover, the Usage page shows the
totals by agent and by day, and the monthly limit's message appears in the chat.

The replies come from the fake model server over real HTTP, so the figures are the ones it reported.
"""

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import expect

from agents_app.fake_provider import FakeProvider
from agents_app.models import Run
from agents_app.services import create_agent
from agents_app.usage.limit import month_bounds
from tests.e2e.helpers import chat_with, reply_of, send, wait_until

SNAPSHOT = "fake-model-2026-01-01"
LIMIT = 1000
PHONE = {"width": 390, "height": 800}


@pytest.fixture
def fake():
    with FakeProvider(text="Plenty of words in this answer, {prompt}.", reported_model=SNAPSHOT) as server:
        yield server


@pytest.fixture(scope="module")
def limited_hub(hub, tmp_path_factory):
    """A second web process on the same database whose HUB_MONTHLY_TOKENS is LIMIT: a message
    sent to it is stored without starting a turn once its user reached the limit."""
    from tests.chaos.cluster import Cluster

    cluster = Cluster(tmp_path_factory.mktemp("e2e-limited"), SECRET_KEY=settings.SECRET_KEY,
                      HUB_MONTHLY_TOKENS=LIMIT)
    try:
        cluster.base = cluster.start_daphne()
        yield cluster
    finally:
        cluster.shutdown()


def figures(usage: dict) -> str:
    return f"{SNAPSHOT} · {usage['input_tokens']:,} in · {usage['output_tokens']:,} out"


@pytest.mark.parametrize("scheme, viewport", [("light", {"width": 1280, "height": 820}), ("dark", PHONE)],
                         ids=["light", "dark-phone"])
def test_a_reply_shows_its_model_and_tokens_on_hover(user, open_page, fake, screenshot, scheme, viewport):
    agent = create_agent(owner=user, name="Writer", model="openai:fake-model", base_url=fake.openai_url)
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", color_scheme=scheme, viewport=viewport)
    send(page, "Ada")
    reply = wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final" and r, what="the reply")
    shown = figures(fake.requests[-1].usage)

    item = page.locator(f'li[data-message-id="{reply.pk}"]')
    expect(item.locator(".msg-usage")).to_have_text(shown)
    item.hover()
    expect(item.locator(".msg-usage")).to_have_css("opacity", "1")
    assert item.locator(".msg-meta time").get_attribute("title").endswith(f" · {shown}")  # on the time too
    # The question shows none: only a reply has a model.
    expect(page.locator("li.msg-user .msg-usage")).to_have_count(0)
    screenshot(page, f"usage-hover-{scheme}-{viewport['width']}")
    if viewport["width"] > 700:
        page.mouse.move(0, 0)
        expect(item.locator(".msg-usage")).to_have_css("opacity", "0")  # out of the way until hovered


DESKTOP = {"width": 1280, "height": 820}


@pytest.mark.parametrize("scheme, viewport", [("light", DESKTOP), ("dark", DESKTOP), ("light", PHONE)],
                         ids=["light", "dark", "phone"])
def test_the_usage_page_shows_the_totals_by_agent_and_day(user, open_page, fake, screenshot, scheme, viewport):
    agent = create_agent(owner=user, name="Writer", model="openai:fake-model", base_url=fake.openai_url)
    chat = chat_with(user, agent)
    page = open_page(user, f"/chats/{chat.pk}/", color_scheme=scheme, viewport=viewport)
    send(page, "Ada")
    wait_until(lambda: (r := reply_of(agent, chat)) and r.status == "final", what="the reply")
    usage = fake.requests[-1].usage
    total = usage["input_tokens"] + usage["output_tokens"]

    if viewport["width"] > 700:
        page.get_by_role("link", name="Usage").click()
    else:
        page.goto(page.url.split("/chats/")[0] + "/usage/")
    expect(page.get_by_role("heading", name="Usage")).to_be_visible()
    expect(page.locator('[data-figure="total"]')).to_have_text(f"{total:,}")
    expect(page.locator('[data-figure="input"]')).to_have_text(f"{usage['input_tokens']:,}")
    rows = page.locator("#usage-by-agent tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Writer")
    expect(page.locator("#usage-by-day tbody tr")).to_have_count(1)
    expect(page.locator("#usage-by-day tbody tr").first).to_contain_text(timezone.now().date().isoformat())
    screenshot(page, f"usage-page-{scheme}-{viewport['width']}")

    page.get_by_role("link", name="Last 7 days").click()
    expect(page.get_by_role("link", name="Last 7 days")).to_have_attribute("aria-current", "page")
    expect(page.locator('[data-figure="total"]')).to_have_text(f"{total:,}")


def test_the_usage_page_when_nothing_was_used(user, open_page, screenshot):
    page = open_page(user, "/usage/", viewport=PHONE)
    expect(page.locator("#usage-empty")).to_have_text(
        "No tokens used in this period. Replies count here once they finish.")
    expect(page.locator('[data-figure="total"]')).to_have_text("0")
    screenshot(page, "usage-page-empty-390")


def test_the_usage_page_counts_a_reply_that_ends_while_it_is_open(user, open_page, fake):
    """The reply is sent from another tab (here, the services a tab's send calls): the open Usage
    page shows its tokens when it ends, without a reload, and the empty note goes."""
    from chats import services

    agent = create_agent(owner=user, name="Writer", model="openai:fake-model", base_url=fake.openai_url)
    chat = chat_with(user, agent)
    page = open_page(user, "/usage/")
    expect(page.locator("#usage-empty")).to_be_visible()
    for answered, question in enumerate(("Ada", "Grace"), start=1):
        services.send_message(chat=chat, content=question)
        wait_until(lambda n=answered: Run.objects.filter(chat=chat, status="succeeded").count() == n,
                   what=f"reply {answered}")
    used = [request.usage for request in fake.requests]
    total = sum(usage["input_tokens"] + usage["output_tokens"] for usage in used)
    expect(page.locator('[data-figure="total"]')).to_have_text(f"{total:,}")
    expect(page.locator('[data-figure="runs"]')).to_have_text("2")
    expect(page.locator("#usage-by-agent tbody tr")).to_contain_text("Writer")
    expect(page.locator("#usage-empty")).to_have_count(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_monthly_limit_stops_the_reply_with_a_clear_message(user, open_page, fake, limited_hub, screenshot,
                                                                scheme):
    agent = create_agent(owner=user, name="Writer", model="openai:fake-model", base_url=fake.openai_url)
    chat = chat_with(user, agent)
    Run.objects.create(agent=agent, chat=chat, owner=user, status=Run.Status.SUCCEEDED, finished_at=timezone.now(),
                       input_tokens=LIMIT - 200, output_tokens=200)
    page = open_page(user, f"/chats/{chat.pk}/", base=limited_hub.base, color_scheme=scheme)
    send(page, "Still there?")

    resets = month_bounds()[1]
    notice = (f"Monthly token limit reached: {LIMIT:,} of {LIMIT:,} tokens used; "
              f"it resets on {resets.day} {resets:%B}.")
    failed = page.locator("li.msg-agent.state-failed")
    expect(failed.get_by_role("alert")).to_have_text(notice)
    expect(page.locator("li.msg-user .msg-content")).to_have_text("Still there?")
    assert fake.requests == [] and Run.objects.filter(chat=chat).count() == 1
    screenshot(page, f"usage-limit-chat-{scheme}")

    page.goto(limited_hub.base + "/usage/")
    expect(page.locator("#usage-limit")).to_contain_text("Monthly limit reached")
    expect(page.locator("#usage-limit")).to_contain_text(f"{LIMIT:,} of {LIMIT:,} tokens used · 0 left")
    screenshot(page, f"usage-limit-page-{scheme}")
