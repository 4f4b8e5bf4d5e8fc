"""The Usage page (/usage/) and the admin's (/admin/usage/): a user's tokens by agent and by day,
everyone's for staff only. Turns go through the fake model server over real HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import Run
from agents_app.services import create_agent
from agents_app.turns.execution import execute_run
from chats.services import send_message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_provider_environment")]


def used(owner, fake, name, *, days_ago=0) -> int:
    """One real turn of owner's agent `name`; returns its tokens (in + out) as the server reported."""
    agent = create_agent(owner=owner, name=name, model="openai:fake-model", base_url=fake.openai_url)
    trigger = send_message(chat=agent.main_chat, content="A question of several words for the model")
    run = Run.objects.get(trigger_message=trigger)
    assert execute_run(run.pk) == "succeeded"
    if days_ago:
        Run.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(days=days_ago))
    reported = fake.requests[-1].usage
    return reported["input_tokens"] + reported["output_tokens"]


def figure(html: str, name: str) -> str:
    marker = f'data-figure="{name}">'
    return html.split(marker, 1)[1].split("<", 1)[0]


def test_the_usage_page_shows_the_users_own_tokens_by_agent_and_day(client, user, other_user, fake):
    ada = used(user, fake, "Ada")
    bob = used(user, fake, "Bob", days_ago=2)
    used(other_user, fake, "Secret agent")
    client.force_login(user)

    page = client.get("/usage/")
    html = page.content.decode()
    assert page.status_code == 200
    assert figure(html, "total") == f"{ada + bob:,}"
    assert "Ada" in html and "Bob" in html and "Secret agent" not in html
    assert (timezone.now() - timedelta(days=2)).date().isoformat() in html
    assert 'href="/usage/"' in html  # the sidebar's link
    assert "Monthly limit" not in html  # none set


def test_the_usage_page_has_an_empty_state_and_names_a_bad_period(client, user):
    client.force_login(user)
    html = client.get("/usage/?days=7").content.decode()
    assert "No tokens used in this period." in html and figure(html, "total") == "0"
    bad = client.get("/usage/?month=someday")
    assert bad.status_code == 400
    assert "month: must be a month as YYYY-MM" in bad.content.decode()


def test_the_usage_page_shows_the_monthly_limit_and_what_is_left(client, user, fake, settings):
    spent = used(user, fake, "Ada")
    settings.HUB_MONTHLY_TOKENS = spent * 4
    client.force_login(user)
    html = client.get("/usage/").content.decode()
    assert f"{spent:,} of {spent * 4:,} tokens used · {spent * 3:,} left" in html
    settings.HUB_MONTHLY_TOKENS = spent
    html = client.get("/usage/").content.decode()
    assert "Monthly limit reached" in html and "0 left" in html


def test_the_usage_page_needs_a_login(client):
    answer = client.get("/usage/")
    assert answer.status_code == 302 and "/login/" in answer["Location"]
