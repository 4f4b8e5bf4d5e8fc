import json

import pytest

from chats import events, services

pytestmark = pytest.mark.django_db


def test_message_created_round_trips_through_json(chat, make_agent, user):
    agent = make_agent(user, name="Echo", avatar="🦜")
    message = services.send_message(chat=chat, content="hi", sender_agent=agent, new_thread_title="T")
    event = json.loads(json.dumps(events.message_created(message, client_id="c1")))
    assert event["type"] == "message.created"
    assert event["client_id"] == "c1"
    body = event["message"]
    assert body["sender"] == {"type": "agent", "id": agent.pk, "name": "Echo", "avatar": "🦜"}
    assert body["thread_id"] == message.thread_id
    assert set(body) >= {"id", "chat_id", "kind", "subkind", "format", "content", "status", "run_id", "created_at"}


def test_every_event_is_json_safe(chat):
    message = services.send_message(chat=chat, content="hi", new_thread_title="T")
    payloads = [
        events.message_edited(message),
        events.message_settled(message),
        events.message_delta(message_id=message.pk, run_id="r", offset=0, text="x"),
        events.thread_created(message.thread),
        events.chat_updated(chat, members=[]),
        events.chat_deleted(chat),
        events.directory_updated(chat, change="created"),
    ]
    for payload in payloads:
        assert json.loads(json.dumps(payload))["type"].count(".") == 1


def test_broadcasts_wait_for_commit(chat, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        services.send_message(chat=chat, content="hi")
    assert len(callbacks) >= 2  # directory.updated and message.created, both after commit


@pytest.fixture
def relayed(monkeypatch):
    """Every channel-layer message sent, as ("relay", group, [event types]), and every turn task
    sent, as ("task", run id), in the order they went out."""
    from agents_app.turns import runs

    sent = []
    monkeypatch.setattr(events, "relay", lambda group, batch: sent.append(("relay", group, [e["type"] for e in batch])))
    monkeypatch.setattr(runs, "send_turn_task", lambda run_id: sent.append(("task", run_id)))
    return sent


@pytest.mark.django_db(transaction=True)
def test_a_sent_message_reaches_each_group_in_one_message_before_its_agent_is_asked(chat, user, make_agent,
                                                                                   relayed):
    agent = make_agent(user, name="Helper", model="test:scripted")
    services.add_member(chat=chat, agent=agent)
    relayed.clear()
    services.send_message(chat=chat, content="hi")
    assert relayed[:2] == [
        ("relay", events.user_group(user.pk), ["directory.updated"]),
        ("relay", events.chat_group(chat.pk), ["message.created", "run.updated"]),
    ]
    assert relayed[2][0] == "task" and len(relayed) == 3  # the worker is asked after the tabs heard


@pytest.mark.django_db(transaction=True)
def test_a_batch_sends_only_what_committed(relayed):
    from django.db import transaction

    with events.batched():
        with transaction.atomic():
            events.broadcast_on_commit("g", {"type": "kept.first"})
            try:
                with transaction.atomic():
                    events.broadcast_on_commit("g", {"type": "rolled.back"})
                    raise RuntimeError("the savepoint rolls back")
            except RuntimeError:
                pass
        with events.batched(), transaction.atomic():  # a block inside another adds to the outer one
            events.broadcast_on_commit("g", {"type": "kept.second"})
        assert relayed == []  # nothing before the outer block ends
    assert relayed == [("relay", "g", ["kept.first", "kept.second"])]


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_fails_after_a_commit_still_sends_what_committed(relayed):
    from django.db import transaction

    with pytest.raises(ValueError), events.batched():
        with transaction.atomic():
            events.broadcast_on_commit("g", {"type": "committed"})
        with transaction.atomic():
            events.broadcast_on_commit("g", {"type": "rolled.back"})
            raise ValueError("the second transaction fails")
    assert relayed == [("relay", "g", ["committed"])]
