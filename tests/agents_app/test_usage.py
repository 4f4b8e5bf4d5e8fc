"""What each reply cost, as its provider reported it over real HTTP (the fake model server), and
the monthly token limit that stops new turns.

Every turn goes the way a user's does: create_agent, send_message, a worker executing the run.
"""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents_app import services as agent_services
from agents_app.fake_provider import Answer, ToolCall
from agents_app.models import Agent, Run
from agents_app.turns import recovery, runs
from agents_app.usage import limit as usage_limit
from chats import events, services
from chats.models import Chat, Message
from hub.errors import HubError

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_provider_environment")]

SNAPSHOT = "fake-model-2026-01-01"


@pytest.fixture
def writer(user, fake):
    def make(owner=None, name="Writer", api="openai", **fields):
        model, base_url = ("openai:fake-model", fake.openai_url) if api == "openai" else ("anthropic:fake-claude",
                                                                                          fake.url)
        return agent_services.create_agent(owner=owner or user, name=name, model=model, base_url=base_url, **fields)

    return make


def reply_of(agent) -> Message:
    return Message.objects.get(sender_agent=agent, kind="message")


def summed(*usages) -> dict:
    return {"input_tokens": sum(u["input_tokens"] for u in usages),
            "output_tokens": sum(u["output_tokens"] for u in usages)}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_reply_keeps_the_model_and_tokens_its_provider_reported(fake, writer, run_now, api):
    fake.script(text="Four words of answer", reported_model=SNAPSHOT)
    agent = writer(api=api)
    services.send_message(chat=agent.main_chat, content="How are you today?")

    assert run_now() == ["succeeded"]
    reported = fake.requests[-1].usage
    assert reported["model"] == SNAPSHOT and reported["input_tokens"] > 0 and reported["output_tokens"] == 4
    reply = reply_of(agent)
    expected = {"model": SNAPSHOT, **summed(reported), "requests": 1}
    assert reply.data["usage"] == expected
    # The page's payload and the API's representation carry it, through JSON.
    payload = json.loads(json.dumps(events.message_payload(reply)))
    assert payload["usage"] == expected
    run = Run.objects.get(reply_message=reply)
    assert (run.model, run.input_tokens, run.output_tokens, run.owner_id) == (
        SNAPSHOT, reported["input_tokens"], reported["output_tokens"], agent.main_chat.owner_id)


def test_a_streamed_request_asks_the_server_to_report_its_usage(fake, writer, run_now):
    agent = writer()
    services.send_message(chat=agent.main_chat, content="Hello")
    run_now()
    assert fake.requests[0].body["stream"] is True
    assert fake.requests[0].body["stream_options"] == {"include_usage": True}


def test_a_tool_turn_counts_every_request_of_the_reply(fake, writer, run_now):
    fake.script(tool_calls=[ToolCall("record_effect", {"key": "k"})], text="I recorded it.")
    agent = writer(tools=["record_effect"])
    services.send_message(chat=agent.main_chat, content="please record")

    assert run_now() == ["succeeded"]
    first, second = fake.requests
    assert reply_of(agent).data["usage"] == {"model": "fake-model", **summed(first.usage, second.usage), "requests": 2}


def test_the_settle_event_carries_the_usage(fake, writer, run_now, monkeypatch):
    sent = []
    original = events.relay
    monkeypatch.setattr(events, "relay", lambda group, batch: (sent.extend(batch), original(group, batch)))
    agent = writer()
    services.send_message(chat=agent.main_chat, content="Hello")
    run_now()

    settled = [e for e in sent if e["type"] == events.MESSAGE_SETTLED and e["message"]["status"] == "final"]
    assert settled[-1]["message"]["usage"]["output_tokens"] == fake.requests[-1].usage["output_tokens"]


def test_a_continuation_after_a_recovery_counts_the_lost_runs_requests_too(fake, writer, run_now):
    """The worker died after a tool request finished (its checkpoint counted it): the lost run
    records those tokens, the continuation its own, and the reply both."""
    agent = writer()
    trigger = services.send_message(chat=agent.main_chat, content="Tell me about the fox")
    run = Run.objects.get(trigger_message=trigger)
    token = runs.claim(run.pk)
    reply = services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    spent = {"model": "fake-model", "input_tokens": 120, "output_tokens": 30, "requests": 1}
    assert runs.save_checkpoint(run.pk, token, {"text": "The quick brown", "usage": spent})
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    continuation = recovery.recover_run(run.pk, reason="worker lost")
    assert "usage" not in continuation.checkpoint  # counted once: by the lost run
    reply.refresh_from_db()
    assert reply.data["usage"] == spent  # an interrupted reply shows what it cost so far

    assert run_now() == ["succeeded"]
    lost = Run.objects.get(pk=run.pk)
    assert (lost.status, lost.input_tokens, lost.output_tokens) == ("recovered", 120, 30)
    own = fake.requests[-1].usage
    continued = Run.objects.get(pk=continuation.pk)
    assert (continued.input_tokens, continued.output_tokens) == (own["input_tokens"], own["output_tokens"])
    reply.refresh_from_db()
    assert reply.data["usage"] == {"model": "fake-model", "input_tokens": 120 + own["input_tokens"],
                                   "output_tokens": 30 + own["output_tokens"], "requests": 2}


@pytest.mark.alone
def test_a_stalled_tool_turn_keeps_the_tokens_of_the_requests_that_finished(fake, writer, run_now, settings):
    settings.HUB_STALL_SECONDS = 0.5
    fake.queue(Answer(tool_calls=[ToolCall("record_effect", {"key": "k"})]),
               Answer(text="The quick brown fox jumps", chunk_size=5, stall_after=3),
               Answer(text="The quick brown fox jumps"))
    agent = writer(tools=["record_effect"])
    services.send_message(chat=agent.main_chat, content="record it")

    assert run_now() == ["stalled", "succeeded"]
    tool_request, stalled, answered = fake.requests
    assert stalled.usage == {}  # a stream cut short reports nothing
    lost, continued = Run.objects.order_by("created_at")
    assert (lost.input_tokens, lost.output_tokens) == (tool_request.usage["input_tokens"],
                                                       tool_request.usage["output_tokens"])
    assert (continued.input_tokens, continued.output_tokens) == (answered.usage["input_tokens"],
                                                                 answered.usage["output_tokens"])
    assert reply_of(agent).data["usage"] == {"model": "fake-model", **summed(tool_request.usage, answered.usage),
                                             "requests": 2}


def test_a_regenerated_answer_counts_its_own_tokens_and_the_old_version_keeps_its(fake, writer, run_now):
    agent = writer()
    services.send_message(chat=agent.main_chat, content="Hello")
    run_now()
    first = reply_of(agent).data["usage"]
    fake.script(text="A much longer second answer than the first one was", reported_model=SNAPSHOT)
    agent_services.regenerate(message=reply_of(agent))
    run_now()

    reply = reply_of(agent)
    assert reply.data["versions"][0]["usage"] == first
    assert reply.data["usage"] == {"model": SNAPSHOT, **summed(fake.requests[-1].usage), "requests": 1}


def test_a_turn_without_a_limit_makes_no_more_statements(fake, writer, run_now):
    """The usage goes into the run's finishing statement: a plain turn's count stays as
    tests/agents_app/test_turn_queries.py holds it, and a send reads no usage."""
    agent = writer()
    with CaptureQueriesContext(connection) as sending:
        services.send_message(chat=agent.main_chat, content="Hello")
    assert not any("SUM(" in q["sql"].upper() for q in sending.captured_queries)


# --- The monthly limit ------------------------------------------------------------------------

def used_up(user, agent, tokens: int) -> None:
    """A finished run of this month that cost tokens (as a reply's run records it)."""
    Run.objects.create(agent=agent, chat=agent.main_chat, owner=user, status=Run.Status.SUCCEEDED,
                       finished_at=timezone.now(), input_tokens=tokens - tokens // 4, output_tokens=tokens // 4)


def test_the_limit_stops_new_turns_with_a_clear_message_and_keeps_the_users(fake, writer, run_now, user, settings):
    settings.HUB_MONTHLY_TOKENS = 1000
    agent = writer()
    used_up(user, agent, 1000)

    with CaptureQueriesContext(connection) as sending:
        message = services.send_message(chat=agent.main_chat, content="Still there?")
    assert sum("SUM(" in q["sql"].upper() for q in sending.captured_queries) == 1  # one indexed sum

    assert Message.objects.filter(pk=message.pk, content="Still there?").exists()
    assert not Run.objects.filter(trigger_message=message).exists() and run_now() == []
    assert fake.requests == []
    refused = Message.objects.get(reply_to=message)
    assert (refused.sender_agent_id, refused.status, refused.run_id) == (agent.pk, "error", None)
    resets = usage_limit.month_bounds()[1]
    assert refused.data["error"] == (f"Monthly token limit reached: 1,000 of 1,000 tokens used; "
                                     f"it resets on {resets.day} {resets:%B}.")
    assert refused.data["token_limit"]["reached"] is True


def test_under_the_limit_turns_run_and_count_towards_it(fake, writer, run_now, user, settings):
    settings.HUB_MONTHLY_TOKENS = 10_000
    agent = writer()
    used_up(user, agent, 9_000)
    services.send_message(chat=agent.main_chat, content="One more")
    assert run_now() == ["succeeded"]
    status = usage_limit.limit_status(owner_id=user.pk)
    reported = fake.requests[-1].usage
    assert status["used"] == 9_000 + reported["input_tokens"] + reported["output_tokens"]
    assert status["left"] == 10_000 - status["used"] and not status["reached"]


def test_last_months_tokens_and_other_users_do_not_count(fake, writer, run_now, user, other_user, settings):
    settings.HUB_MONTHLY_TOKENS = 1000
    agent = writer()
    used_up(other_user, writer(owner=other_user, name="Theirs"), 5000)
    Run.objects.create(agent=agent, chat=agent.main_chat, owner=user, status=Run.Status.SUCCEEDED,
                       finished_at=usage_limit.month_bounds()[0] - timedelta(seconds=1), input_tokens=5000)
    services.send_message(chat=agent.main_chat, content="Hi")
    assert run_now() == ["succeeded"]


def test_regenerate_and_continue_refuse_once_the_limit_is_reached(fake, writer, run_now, user, settings):
    agent = writer()
    services.send_message(chat=agent.main_chat, content="Hi")
    run_now()
    settings.HUB_MONTHLY_TOKENS = 1
    with pytest.raises(HubError, match="Monthly token limit reached") as refused:
        agent_services.regenerate(message=reply_of(agent))
    assert refused.value.status == 429 and refused.value.code == "token_limit_reached"
    with pytest.raises(HubError, match="Monthly token limit reached"):
        agent_services.continue_last_turn(chat=agent.main_chat, agent=agent)
    assert Run.objects.count() == 1 and reply_of(agent).status == "final"


def test_a_turn_already_running_finishes_when_the_limit_is_reached_meanwhile(fake, writer, run_now, user, settings):
    agent = writer()
    services.send_message(chat=agent.main_chat, content="Hi")
    settings.HUB_MONTHLY_TOKENS = 10
    used_up(user, agent, 10)
    assert run_now() == ["succeeded"]
    assert reply_of(agent).status == "final"


def test_the_librarians_replies_cost_no_tokens(user, run_now, settings):
    """The built-in Librarian runs in the hub: no provider reports its tokens (pydantic-ai only
    estimates them), so its replies show none and count towards no limit."""
    agent_services.ensure_builtin_agents()  # made by a migration; transactional tests flush it
    librarian = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    chat = services.create_chat(owner=user, title="Ask", agents=[librarian])
    services.send_message(chat=chat, content="list my chats")
    assert run_now() == ["succeeded"]

    reply = reply_of(librarian)
    assert reply.content and "usage" not in reply.data and events.message_payload(reply)["usage"] is None
    run = Run.objects.get(reply_message=reply)
    assert run.usage["requests"] >= 1  # the estimate stays on the run, for staff
    assert (run.model, run.input_tokens, run.output_tokens) == ("", 0, 0)
    settings.HUB_MONTHLY_TOKENS = 1
    assert usage_limit.reached(owner_id=user.pk) is None


def test_a_temporary_chats_tokens_count_once_saved_or_not(fake, writer, run_now, user, settings):
    """A temporary chat's runs live in its image: their tokens are kept in the hub's database all
    the same (the model and the counts, no text), counted by the limit and the Usage page, and
    saving the chat does not count them twice."""
    from agents_app.models import TemporaryChatUsage
    from agents_app.usage import report
    from chats.temporary.scope import inside

    agent = writer()
    chat = services.create_chat(owner=user, title="Scratch", agents=[agent], temporary=True)
    with inside(chat.pk):
        services.send_message(chat=chat, content="A quick question")
        assert run_now() == ["succeeded"]
        reply = Message.objects.get(chat=chat, sender_agent=agent)
    reported = fake.requests[-1].usage
    spent = reported["input_tokens"] + reported["output_tokens"]
    assert reply.data["usage"]["input_tokens"] == reported["input_tokens"]
    kept = TemporaryChatUsage.objects.get()
    assert (kept.owner_id, kept.agent_id, kept.model, kept.input_tokens, kept.output_tokens) == (
        user.pk, agent.pk, "fake-model", reported["input_tokens"], reported["output_tokens"])
    assert not Run.objects.exists()
    assert usage_limit.tokens_between(owner_id=user.pk, start=usage_limit.month_bounds()[0]) == spent

    def total():
        return report.usage_for_user(user=user, period=report.period_from(days=1))["totals"]["total_tokens"]

    assert total() == spent
    services.save_chat(chat=chat)
    assert Run.objects.get(chat_id=chat.pk).input_tokens == 0  # its tokens are counted once, above
    assert total() == spent
    settings.HUB_MONTHLY_TOKENS = spent
    services.send_message(chat=Chat.objects.get(pk=chat.pk), content="And another")  # now a stored chat
    assert run_now() == [] and len(fake.requests) == 1
    scratch = services.create_chat(owner=user, title="Another", agents=[agent], temporary=True)
    with inside(scratch.pk):  # the limit holds in a temporary chat too
        question = services.send_message(chat=scratch, content="Sneaky")
        assert run_now() == [] and not Run.objects.exists()
        assert Message.objects.get(reply_to=question).data["error"].startswith("Monthly token limit reached")
