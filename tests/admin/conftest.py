"""Fixtures of the admin and repair tests: staff, broken states made through real services, and
a snapshot of every row so a test can prove a repair changed nothing but what it fixed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.agents_app.conftest import scripted_agent  # noqa: F401  (a fixture used here too)


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("support", "support@example.com", "pass-for-tests-1")


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def snapshot() -> dict:
    """Every row of the tables a repair may touch, as plain values by primary key."""
    from agents_app.models import Agent, Run
    from chats.models import Chat, Membership, Message, Thread

    return {
        model.__name__: {row["pk"]: row for row in model.objects.values("pk", *[
            f.attname for f in model._meta.concrete_fields if f.attname != model._meta.pk.attname])}
        for model in (Agent, Run, Chat, Membership, Message, Thread)
    }


def changed(before: dict, after: dict) -> dict:
    """{model: {pk: set of changed fields, or "added"/"removed"}} between two snapshots."""
    out = {}
    for model, rows in after.items():
        diff = {}
        for pk, row in rows.items():
            old = before[model].get(pk)
            if old is None:
                diff[pk] = "added"
            else:
                fields = {k for k in row if row[k] != old[k]}
                if fields:
                    diff[pk] = fields
        for pk in before[model].keys() - rows.keys():
            diff[pk] = "removed"
        if diff:
            out[model] = diff
    return out


def lose_lease(run, seconds: int = 60) -> None:
    """What a SIGKILLed worker leaves behind: a running run whose lease ran out."""
    from agents_app.models import Run

    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=seconds))


def start_streaming(run, text: str = ""):
    """A worker takes the run, creates its reply and checkpoints text (then, in tests, stops)."""
    from agents_app.models import Run
    from agents_app.turns import runs
    from chats import services
    from chats.streams import replay_buffer

    token = runs.claim(run.pk)
    run.refresh_from_db()
    reply = services.start_reply(chat=run.chat, agent=run.agent, thread=run.thread, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    replay_buffer().reset(reply.pk, {"text": text})  # as the worker does before it streams
    if text:
        runs.save_checkpoint(run.pk, token, {"text": text})
        services.save_reply_progress(message_id=reply.pk, content=text)
    reply.refresh_from_db()
    return token, reply


@pytest.fixture
def asked(scripted_agent):  # noqa: F811
    """ask(text) -> the queued run of a scripted agent's answer to text, in its main chat."""
    from agents_app.models import Run
    from chats import services

    agent = scripted_agent(reply="The quick brown fox jumps over the lazy dog.")

    def ask(text: str = "Tell me", agent_=None):
        target = agent_ or agent
        trigger = services.send_message(chat=target.main_chat, content=text)
        return Run.objects.select_related("agent", "chat").get(trigger_message=trigger)

    ask.agent = agent
    return ask
