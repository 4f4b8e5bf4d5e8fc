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
