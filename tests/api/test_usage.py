"""GET /api/v1/usage/: a user's own tokens by agent and by day, as the providers reported them
(the fake model server, over real HTTP); the monthly limit as the API reports it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import Run
from agents_app.services import create_agent
from chats.models import Message
from chats.services import send_message

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_provider_environment")]


def agent_of(owner, fake, name):
    return create_agent(owner=owner, name=name, model="openai:fake-model", base_url=fake.openai_url)


def reply_turn(agent, run_now, fake, *, days_ago=0) -> dict:
    """One real turn through the fake model server; returns what the server reported."""
    trigger = send_message(chat=agent.main_chat, content=f"Question to {agent.name}, {days_ago} days ago")
    run_now()
    if days_ago:
        Run.objects.filter(trigger_message=trigger).update(finished_at=timezone.now() - timedelta(days=days_ago))
    return fake.requests[-1].usage


def test_usage_sums_the_users_tokens_by_agent_and_by_day(api, user, other_user, fake, run_now):
    ada, bob = agent_of(user, fake, "Ada"), agent_of(user, fake, "Bob")
    today = [reply_turn(ada, run_now, fake), reply_turn(ada, run_now, fake), reply_turn(bob, run_now, fake)]
    earlier = reply_turn(bob, run_now, fake, days_ago=3)
    long_ago = reply_turn(ada, run_now, fake, days_ago=40)
    theirs = reply_turn(agent_of(other_user, fake, "Theirs"), run_now, fake)

    body = api.get("/api/v1/usage/").json()

    def total(*usages):
        return sum(u["input_tokens"] + u["output_tokens"] for u in usages)

    assert body["period"]["days"] == 30 and len(body["by_day"]) == 30
    by_agent = {row["agent_name"]: row for row in body["by_agent"]}
    assert set(by_agent) == {"Ada", "Bob"}  # another user's agent is never shown
    assert by_agent["Ada"]["total_tokens"] == total(today[0], today[1])
    assert by_agent["Ada"]["input_tokens"] == today[0]["input_tokens"] + today[1]["input_tokens"]
    assert by_agent["Ada"]["runs"] == 2
    assert by_agent["Bob"]["total_tokens"] == total(today[2], earlier)
    assert body["totals"]["total_tokens"] == total(*today, earlier) != total(*today, earlier, long_ago, theirs)
    days = {row["date"]: row["total_tokens"] for row in body["by_day"]}
    now = timezone.now()
    assert days[now.date().isoformat()] == total(*today)
    assert days[(now - timedelta(days=3)).date().isoformat()] == total(earlier)
    assert sum(days.values()) == body["totals"]["total_tokens"]
    assert body["limit"] == {"monthly_tokens": None, "used": None, "left": None, "reached": False,
                             "resets_on": body["limit"]["resets_on"]}

    week = api.get("/api/v1/usage/?days=60").json()
    assert week["totals"]["total_tokens"] == total(*today, earlier, long_ago)


def test_usage_of_a_calendar_month(api, user, fake, run_now):
    agent = agent_of(user, fake, "Ada")
    reported = reply_turn(agent, run_now, fake)
    month = timezone.now().strftime("%Y-%m")
    body = api.get(f"/api/v1/usage/?month={month}").json()
    assert body["period"]["month"] == month and body["period"]["start"] == f"{month}-01"
    assert body["totals"]["total_tokens"] == reported["input_tokens"] + reported["output_tokens"]
    assert api.get("/api/v1/usage/?month=2001-02").json()["totals"]["total_tokens"] == 0


def test_a_user_without_usage_gets_zeros(api_for, other_user):
    body = api_for(other_user).get("/api/v1/usage/?days=7").json()
    assert body["by_agent"] == [] and body["totals"]["total_tokens"] == 0
    assert [row["total_tokens"] for row in body["by_day"]] == [0] * 7


@pytest.mark.parametrize("query, field", [
    ("days=0", "days"), ("days=400", "days"), ("days=many", "days"), ("month=2026-13", "month"),
    ("month=last", "month"), ("month=2026-01&days=3", "month"),
])
def test_a_bad_period_is_a_400_naming_the_field(api, query, field):
    answer = api.get(f"/api/v1/usage/?{query}")
    assert answer.status_code == 400
    assert field in answer.json()["error"]["fields"]


def test_usage_needs_credentials(client):
    assert client.get("/api/v1/usage/").status_code in (401, 403)


def test_the_limit_in_the_api_stops_sends_and_says_why(api, user, fake, run_now, settings):
    agent = agent_of(user, fake, "Ada")
    reported = reply_turn(agent, run_now, fake)
    used = reported["input_tokens"] + reported["output_tokens"]
    settings.HUB_MONTHLY_TOKENS = used

    limit = api.get("/api/v1/usage/").json()["limit"]
    assert limit == {"monthly_tokens": used, "used": used, "left": 0, "reached": True,
                     "resets_on": limit["resets_on"]}
    sent = api.post(f"/api/v1/chats/{agent.main_chat_id}/messages/", {"content": "More please"}, format="json")
    assert sent.status_code == 201
    body = sent.json()
    assert body["message"]["content"] == "More please" and body["runs"] == []
    (refused,) = body["refused"]
    assert refused["status"] == "error" and refused["sender"]["name"] == "Ada"
    assert refused["data"]["error"].startswith(f"Monthly token limit reached: {used:,} of {used:,} tokens used;")
    assert Message.objects.filter(pk=body["message"]["id"]).exists() and len(fake.requests) == 1

    reply_run = Run.objects.filter(agent=agent).first()
    regenerated = api.post(f"/api/v1/runs/{reply_run.pk}/regenerate/")
    assert regenerated.status_code == 429
    assert regenerated.json()["error"]["code"] == "token_limit_reached"


def test_a_reply_in_the_api_carries_its_usage(api, user, fake, run_now):
    agent = agent_of(user, fake, "Ada")
    reported = reply_turn(agent, run_now, fake)
    page = api.get(f"/api/v1/chats/{agent.main_chat_id}/messages/").json()["results"]
    question, reply = page[-2:]
    assert question["usage"] is None
    assert reply["usage"] == {"model": "fake-model", "input_tokens": reported["input_tokens"],
                              "output_tokens": reported["output_tokens"], "requests": 1}


def test_a_send_and_stream_at_the_limit_names_the_refused_reply_and_ends(api, user, fake, run_now, settings):
    from asgiref.sync import async_to_sync

    agent = agent_of(user, fake, "Ada")
    reply_turn(agent, run_now, fake)
    settings.HUB_MONTHLY_TOKENS = 1
    answer = api.post(f"/api/v1/chats/{agent.main_chat_id}/messages/?stream=true", {"content": "Again"},
                      format="json")
    assert answer.status_code == 200

    async def read():
        return b"".join([chunk async for chunk in answer.streaming_content]).decode()

    body = async_to_sync(read)() if answer.is_async else b"".join(answer.streaming_content).decode()
    events = [line.removeprefix("event: ") for line in body.splitlines() if line.startswith("event: ")]
    assert events == ["message.created", "message.created", "end"]
    assert "Monthly token limit reached" in body and len(fake.requests) == 1
