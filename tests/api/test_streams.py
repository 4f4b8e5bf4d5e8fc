"""Streaming for programs over real HTTP: send-and-stream, and /runs/<id>/events with resume."""

import pytest

from tests.api.sse_client import read_events
from tests.chaos.cluster import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Streaming, piece by piece: " + " ".join(f"word{i}" for i in range(60)) + " — done."


@pytest.fixture
def setup(user, token_for, scripted, http):
    from chats.services import create_chat

    agent = scripted(user, name="Slow", reply=REPLY, chunk=3, delay=0.01)
    chat = create_chat(owner=user, title="Streams", agents=[agent])
    http.headers["Authorization"] = f"Bearer {token_for(user)}"
    return {"chat": chat, "agent": agent, "http": http}


def send(setup, content="hi") -> dict:
    response = setup["http"].post(f"/api/v1/chats/{setup['chat'].pk}/messages/", json={"content": content})
    assert response.status_code == 201, response.text
    return response.json()


def collect(http, url, headers=None, stop_after=None) -> list:
    with http.stream("GET", url, headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(read_events(response, stop_after=stop_after))


def text_of(events, part="text") -> str:
    """The deltas of one part joined, checking each starts exactly where the last ended."""
    text = ""
    for event in events:
        if event.type == "message.delta" and event.data["part"] == part:
            assert event.data["offset"] == len(text), (event.data["offset"], len(text))
            text += event.data["text"]
    return text


def test_send_and_stream_gives_the_message_then_the_reply_as_it_is_written(setup):
    http, chat = setup["http"], setup["chat"]
    with http.stream("POST", f"/api/v1/chats/{chat.pk}/messages/?stream=true",
                     json={"content": "there", "client_id": "c-1"}) as response:
        assert response.status_code == 200
        events = list(read_events(response))
    types = [e.type for e in events]
    assert types[0] == "message.created" and events[0].data["client_id"] == "c-1"
    assert events[0].data["message"]["content"] == "there"
    assert types[-1] == "end" and types[-2] == "run.end"
    assert types.count("message.delta") > 5  # streamed in pieces, not in one answer
    settled = next(e for e in events if e.type == "message.settled").data["message"]
    assert text_of(events) == settled["content"] == REPLY
    statuses = [e.data["run"]["status"] for e in events if e.type == "run.updated"]
    assert statuses == ["queued", "running", "succeeded"]
    assert [r["status"] for r in events[-1].data["runs"]] == ["succeeded"]


def test_a_client_that_reconnects_with_last_event_id_misses_nothing_and_gets_nothing_twice(setup):
    http = setup["http"]
    run_id = send(setup)["runs"][0]["id"]
    url = f"/api/v1/runs/{run_id}/events"
    first = collect(http, url, stop_after=lambda e: e.type == "message.delta" and e.data["offset"] > 20)
    assert first[-1].type == "message.delta"  # cut in the middle of the reply
    second = collect(http, url, headers={"Last-Event-ID": first[-1].id})
    assert second[-1].type == "end"
    both = first + second
    assert text_of(both) == REPLY  # contiguous offsets across the two connections
    statuses = [e.data["run"]["status"] for e in both if e.type == "run.updated"]
    assert statuses == ["queued", "running", "succeeded"]  # no state change repeated either
    assert [e.type for e in both].count("message.settled") == 1

    # Resuming again from an id in the middle gives exactly the rest, now from the stored reply.
    middle = next(e for e in first if e.type == "message.delta" and e.data["offset"] > 5)
    rest = collect(http, url, headers={"Last-Event-ID": middle.id})
    have = middle.data["offset"] + len(middle.data["text"])
    deltas = [e for e in rest if e.type == "message.delta"]
    assert deltas[0].data["offset"] == have and "".join(d.data["text"] for d in deltas) == REPLY[have:]
    assert not [e for e in rest if e.type == "run.updated" and e.data["run"]["status"] in ("queued", "running")]


def test_a_client_that_connects_after_the_reply_finished_gets_all_of_it_and_the_end(setup):
    from agents_app.models import Run

    run_id = send(setup)["runs"][0]["id"]
    wait_for(lambda: Run.objects.get(pk=run_id).status == "succeeded", timeout=30, what="the reply")
    events = collect(setup["http"], f"/api/v1/runs/{run_id}/events")
    assert [e.type for e in events][-2:] == ["message.settled", "end"]
    assert text_of(events) == REPLY
    assert events[-1].data["run"]["status"] == "succeeded"
    # The end event's id says the client has everything: reconnecting with it gives only `end`.
    again = collect(setup["http"], f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": events[-1].id})
    assert [e.type for e in again] == ["end"]


def test_another_users_run_stream_is_not_found(setup, make_user, token_for):
    run_id = send(setup)["runs"][0]["id"]
    stranger = token_for(make_user("stranger"))
    response = setup["http"].get(f"/api/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {stranger}"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
