import pytest

from agents_app.models import Run
from chats import services
from chats.models import ContextBlock, Message

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_user_message_gets_one_streamed_reply(scripted_agent, run_now):
    agent = scripted_agent()
    chat = agent.main_chat
    trigger = services.send_message(chat=chat, content="Ada")
    run = Run.objects.get(trigger_message=trigger)
    assert run.status == "queued" and run.kind == "reply"
    assert run_now() == ["succeeded"]
    run.refresh_from_db()
    reply = run.reply_message
    assert reply.content == "Hello Ada, nice to meet you."
    assert reply.status == "final" and reply.sender_agent == agent
    assert run.status == "succeeded" and run.checkpoint == {}


def test_tools_run_once_and_are_logged(scripted_agent, run_now, user):
    agent = scripted_agent(tools=[("record_effect", {"key": "k1"}), ("record_effect", {"key": "k2"})])
    services.send_message(chat=agent.main_chat, content="go")
    assert run_now() == ["succeeded"]
    assert ContextBlock.objects.get(owner=user, label="effects").content == "k1\nk2\n"
    logs = Message.objects.filter(kind="log", subkind="tool").order_by("id")
    assert [m.data["args"]["key"] for m in logs] == ["k1", "k2"]


def lose_lease(run):
    """What a SIGKILLed worker leaves behind: a running run whose lease has expired."""
    from datetime import timedelta

    from django.utils import timezone

    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_recovery_continues_into_the_same_message(scripted_agent, run_now):
    from agents_app import recovery, runs

    agent = scripted_agent(reply="The quick brown fox jumps over the lazy dog.")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    # A worker takes the run, streams part of the reply, checkpoints, and dies.
    token = runs.claim(run.pk)
    reply = services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    runs.save_checkpoint(run.pk, token, {"text": "The quick brown"})
    lose_lease(run)

    assert recovery.sweep() == {"recovered": 1, "resent": 0}
    run.refresh_from_db()
    reply.refresh_from_db()
    assert run.status == "recovered" and run.checkpoint == {}
    assert reply.status == "interrupted" and reply.content == "The quick brown"
    continuation = Run.objects.get(continues=run)
    assert continuation.kind == "continue" and continuation.attempt == 2
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "The quick brown fox jumps over the lazy dog."
    assert reply.status == "final"
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1


def test_a_turn_that_produced_nothing_is_retried(scripted_agent, run_now):
    from agents_app import recovery, runs

    agent = scripted_agent(reply="fresh")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    runs.claim(run.pk)
    lose_lease(run)
    recovery.sweep()
    retry = Run.objects.get(continues=run)
    assert retry.kind == "reply" and retry.attempt == 2
    assert run_now() == ["succeeded"]
    assert Message.objects.get(sender_agent=agent, kind="message").content == "fresh"


def test_recoveries_are_bounded(scripted_agent, settings):
    from agents_app import recovery, runs

    settings.HUB_MAX_RECOVERIES = 2
    agent = scripted_agent()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    for _ in range(3):
        token = runs.claim(run.pk)
        runs.save_checkpoint(run.pk, token, {"text": "Hel"})
        lose_lease(run)
        recovery.sweep()
        run = runs.latest_in_chain(run)
    assert run.status == "failed" and "interrupted 3 times" in run.error
    assert not Run.objects.filter(status__in=["queued", "running"]).exists()


def test_regenerate_and_continue_reuse_the_reply(scripted_agent, run_now):
    from agents_app import services as agent_services

    agent = scripted_agent(reply="Answer to {prompt}.")
    services.send_message(chat=agent.main_chat, content="life")
    run_now()
    reply = Message.objects.get(sender_agent=agent, kind="message")
    agent_services.regenerate(message=reply)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "Answer to life." and reply.data["versions"][0]["content"] == "Answer to life."
    Message.objects.filter(pk=reply.pk).update(content="Answer", status="interrupted")
    agent_services.continue_last_turn(chat=agent.main_chat, agent=agent)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "Answer to life."
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1


def test_a_failing_model_fails_the_run_with_a_reason_and_keeps_the_question(scripted_agent, run_now):
    agent = scripted_agent(fail="upstream exploded")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["failed"]
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert reply.status == "error" and "upstream exploded" in reply.data["error"]
    assert Message.objects.filter(pk=trigger.pk).exists()
    assert Run.objects.get(trigger_message=trigger).status == "failed"


def test_a_duplicate_delivery_does_nothing(scripted_agent, run_now):
    from agents_app.turns import execute_run

    agent = scripted_agent()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    assert run_now() == ["succeeded"]
    assert execute_run(run.pk) == "skipped"
    assert execute_run("00000000-0000-0000-0000-000000000000") == "missing"
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1
