"""Temporary chats over the API: made, listed, answered by a real worker, saved."""

import time

import pytest

from chats.models import Chat, Message
from tests.api.sse_client import read_events

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_temporary_chat_is_made_listed_read_and_saved_over_the_api(api, user, make_agent, make_user, api_for):
    # An agent that answers nothing: a live hub of this package may be running workers.
    agent = make_agent(user, name="Scribe", reply_policy="never")
    made = api.post("/api/v1/chats/", {"title": "Scratch", "agent_ids": [agent.pk], "temporary": True}, format="json")
    assert made.status_code == 201, made.content
    chat = made.json()
    assert chat["kind"] == "temporary" and chat["expires_at"] and [m["name"] for m in chat["members"]] == ["Scribe"]
    assert not Chat.objects.filter(pk=chat["id"]).exists()
    listed = api.get("/api/v1/chats/").json()["results"]
    assert [(c["title"], c["kind"]) for c in listed] == [("Scratch", "temporary"), ("Scribe", "stored")]
    sent = api.post(f"/api/v1/chats/{chat['id']}/messages/", {"content": "scratch notes"}, format="json")
    assert sent.status_code == 201, sent.content
    page = api.get(f"/api/v1/chats/{chat['id']}/messages/").json()["results"]
    assert [m["content"] for m in page] == ["scratch notes"]

    stranger = api_for(make_user("eve"))
    assert stranger.get(f"/api/v1/chats/{chat['id']}/").status_code == 404
    assert stranger.post(f"/api/v1/chats/{chat['id']}/save/").status_code == 404

    saved = api.post(f"/api/v1/chats/{chat['id']}/save/")
    assert saved.status_code == 200, saved.content
    assert saved.json()["kind"] == "stored" and saved.json()["expires_at"] is None
    assert Message.objects.get(chat_id=chat["id"]).content == "scratch notes"
    again = api.post(f"/api/v1/chats/{chat['id']}/save/")
    assert again.status_code == 200 and again.json()["id"] == chat["id"]
    assert api.get(f"/api/v1/chats/{chat['id']}/").json()["kind"] == "stored"


def test_an_unknown_or_expired_temporary_chat_is_not_found(api, user):
    from chats.temporary import chats as temporary_chats

    made = api.post("/api/v1/chats/", {"title": "Brief", "temporary": True}, format="json").json()
    temporary_chats.remove(made["id"], owner_id=user.pk)
    assert api.get(f"/api/v1/chats/{made['id']}/").status_code == 404
    assert api.post(f"/api/v1/chats/{made['id']}/messages/", {"content": "x"}, format="json").status_code == 404


def test_a_worker_answers_in_a_temporary_chat_and_nothing_reaches_the_database(live_hub, http, user, scripted,
                                                                               token_for):
    agent = scripted(user, reply="Temporary answer about {prompt}")
    http.headers["Authorization"] = f"Bearer {token_for(user)}"
    chat = http.post("/api/v1/chats/", json={"title": "Off the record", "agent_ids": [agent.pk],
                                             "temporary": True}).json()
    assert chat["kind"] == "temporary", chat
    sent = http.post(f"/api/v1/chats/{chat['id']}/messages/", json={"content": "walruses"})
    assert sent.status_code == 201, sent.text
    deadline = time.monotonic() + 30
    while True:
        page = http.get(f"/api/v1/chats/{chat['id']}/messages/").json()["results"]
        replies = [m for m in page if m["sender"]["type"] == "agent" and m["status"] == "final"]
        if replies or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [m["content"] for m in replies] == ["Temporary answer about walruses"], page

    # Send and stream: the reply's events come from the chat's image.
    with http.stream("POST", f"/api/v1/chats/{chat['id']}/messages/?stream=true",
                     json={"content": "narwhals"}) as response:
        assert response.status_code == 200
        events = list(read_events(response))
    assert events[-1].type == "end" and [r["status"] for r in events[-1].data["runs"]] == ["succeeded"]
    settled = next(e for e in events if e.type == "message.settled").data["message"]
    assert settled["content"] == "Temporary answer about narwhals"
    assert not Message.objects.filter(content__contains="walruses").exists()
    assert not Message.objects.filter(content__contains="narwhals").exists()
    assert not Chat.objects.filter(pk=chat["id"]).exists()


def test_a_temporary_chats_runs_are_reached_by_their_own_urls_and_only_by_their_owner(api, user, make_agent,
                                                                                     make_user, api_for):
    agent = make_agent(user, name="Scribe")
    chat = api.post("/api/v1/chats/", {"agent_ids": [agent.pk], "temporary": True}, format="json").json()
    run_id = api.post(f"/api/v1/chats/{chat['id']}/messages/", {"content": "a question"},
                      format="json").json()["runs"][0]["id"]
    run = api.get(f"/api/v1/runs/{run_id}/")
    assert run.status_code == 200, run.content
    assert run.json()["id"] == run_id
    assert api_for(make_user("eve")).get(f"/api/v1/runs/{run_id}/").status_code == 404
    assert api.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 200
