"""The admin's Usage page: every user's tokens by user, by agent and by day, for staff only."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import Run

pytestmark = pytest.mark.django_db


def spent(user, agent, tokens: int, *, days_ago=0) -> None:
    """A finished run of agent that cost tokens, as a turn's finish records it."""
    Run.objects.create(agent=agent, chat=agent.main_chat, owner=user, status=Run.Status.SUCCEEDED,
                       finished_at=timezone.now() - timedelta(days=days_ago), model="fake-model",
                       input_tokens=tokens - tokens // 5, output_tokens=tokens // 5)


def test_staff_see_every_users_tokens_by_user_agent_and_day(staff_client, user, other_user, make_agent):
    spent(user, make_agent(user, name="Ada"), 1200)
    spent(user, make_agent(user, name="Bob"), 800, days_ago=1)
    spent(other_user, make_agent(other_user, name="Cid"), 5000)
    spent(other_user, make_agent(other_user, name="Old"), 30000, days_ago=90)

    page = staff_client.get("/admin/usage/")
    html = page.content.decode()
    assert page.status_code == 200
    by_user = html.split('id="usage-by-user"', 1)[1].split("</table>", 1)[0]
    assert user.username in by_user and other_user.username in by_user
    assert "2,000" in by_user and "5,000" in by_user and "30,000" not in html
    by_agent = html.split('id="usage-by-agent"', 1)[1].split("</table>", 1)[0]
    assert all(name in by_agent for name in ("Ada", "Bob", "Cid")) and "Old" not in by_agent
    assert "30,000" in staff_client.get("/admin/usage/?days=120").content.decode()
    assert "Usage" in staff_client.get("/admin/").content.decode()


def test_the_admin_usage_page_is_for_staff_only(client, user, make_agent):
    spent(user, make_agent(user, name="Ada"), 1200)
    assert client.get("/admin/usage/").status_code == 302  # to the admin's log-in
    client.force_login(user)
    assert client.get("/admin/usage/").status_code == 404  # the admin is hidden from users who are not staff


def test_a_bad_period_is_named(staff_client):
    answer = staff_client.get("/admin/usage/?days=-1")
    assert answer.status_code == 400 and "days: must be a whole number" in answer.content.decode()
