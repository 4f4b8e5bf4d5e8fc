"""Messages, agents and runs over the API (in-process client; turns run in this process)."""

import pytest

from agents_app.models import Run
from chats.models import Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_now():
    from agents_app.turns.execution import execute_run

    def run():
        while (queued := Run.objects.filter(status=Run.Status.QUEUED).order_by("created_at").first()) is not None:
            execute_run(queued.pk)

    return run


def test_send_starts_a_run_per_answering_agent_and_pages_by_id(api, user, scripted, run_now):
    from chats.services import create_chat

    chat = create_chat(owner=user, title="Q", agents=[scripted(user, reply="Answer to {prompt}")])
    sent = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "life", "client_id": "x1"}, format="json")
    assert sent.status_code == 201, sent.content
    body = sent.json()
    assert body["message"]["content"] == "life" and len(body["runs"]) == 1
    assert body["runs"][0]["status"] == "queued"
    run_now()
    run = api.get(f"/api/v1/runs/{body['runs'][0]['id']}/").json()
    assert run["status"] == "succeeded" and run["reply_message_id"]
    reply = api.get(f"/api/v1/chats/{chat.pk}/messages/{run['reply_message_id']}/").json()
    assert reply["content"] == "Answer to life" and reply["sender"]["type"] == "agent"

    for i in range(4):
        api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": f"note {i}", "kind": "note"}, format="json")
    newest = api.get(f"/api/v1/chats/{chat.pk}/messages/?limit=2").json()
    assert [m["content"] for m in newest["results"]] == ["note 2", "note 3"] and newest["has_more"]
    older = api.get(f"/api/v1/chats/{chat.pk}/messages/?limit=2&before={newest['results'][0]['id']}").json()
    assert [m["content"] for m in older["results"]] == ["note 0", "note 1"]
    after = api.get(f"/api/v1/chats/{chat.pk}/messages/?after={body['message']['id']}&limit=1").json()
    assert after["results"][0]["content"] == "Answer to life" and after["has_more"]
    both = api.get(f"/api/v1/chats/{chat.pk}/messages/?after=1&before=2")
    assert both.status_code == 400
    runs = api.get(f"/api/v1/chats/{chat.pk}/runs/").json()["results"]
    assert [r["id"] for r in runs] == [body["runs"][0]["id"]]


def test_send_into_threads_and_edit(api, user, chat):
    made = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "x", "new_thread_title": "Side"}, format="json")
    thread_id = made.json()["message"]["thread_id"]
    assert thread_id is not None
    into = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "y", "thread_id": thread_id}, format="json")
    assert into.json()["message"]["thread_id"] == thread_id
    wrong = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "z", "thread_id": 10**9}, format="json")
    assert wrong.status_code == 400 and "thread_id" in wrong.json()["error"]["fields"]
    empty = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "   "}, format="json")
    assert empty.status_code == 400 and empty.json()["error"]["fields"] == {"content": ["may not be empty"]}
    message_id = into.json()["message"]["id"]
    edited = api.patch(f"/api/v1/chats/{chat.pk}/messages/{message_id}/", {"content": "y2"}, format="json")
    assert edited.status_code == 200 and edited.json()["content"] == "y2" and edited.json()["edited_at"]
    assert Message.objects.get(pk=message_id).content == "y2"


def test_agents_own_and_shared(api, user, make_user):
    from agents_app.services import create_agent

    shared = create_agent(owner=None, name="Everyone's", model="test:scripted")
    made = api.post("/api/v1/agents/", {"name": "Mine", "model": "test:scripted", "reply_policy": "mentioned"},
                    format="json")
    assert made.status_code == 201, made.content
    mine = made.json()
    assert mine["editable"] and mine["main_chat_id"] and mine["reply_policy"] == "mentioned"
    names = {a["name"]: a for a in api.get("/api/v1/agents/").json()["results"]}
    assert names["Everyone's"]["shared"] and not names["Everyone's"]["editable"] and "Mine" in names
    bad = api.post("/api/v1/agents/", {"name": "X", "model": "nonsense-model"}, format="json")
    assert bad.status_code == 400 and "model" in bad.json()["error"]["fields"]
    changed = api.patch(f"/api/v1/agents/{mine['id']}/", {"system_prompt": "Be brief."}, format="json")
    assert changed.status_code == 200 and changed.json()["system_prompt"] == "Be brief."
    assert api.get(f"/api/v1/agents/{shared.pk}/").status_code == 200
    refused = api.patch(f"/api/v1/agents/{shared.pk}/", {"name": "Mine now"}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert api.delete(f"/api/v1/agents/{shared.pk}/").status_code == 403
    assert api.delete(f"/api/v1/agents/{mine['id']}/").status_code == 204
    assert api.get(f"/api/v1/agents/{mine['id']}/").status_code == 404


def test_cancel_continue_and_regenerate_a_run(api, user, scripted, run_now):
    from chats.services import create_chat

    chat = create_chat(owner=user, title="Runs", agents=[scripted(user, reply="First answer.")])
    run_id = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "q"}, format="json").json()["runs"][0]["id"]
    cancelled = api.post(f"/api/v1/runs/{run_id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["cancelled"] is True
    assert cancelled.json()["run"]["status"] == "cancelled"
    again = api.post(f"/api/v1/runs/{run_id}/cancel/").json()
    assert again["cancelled"] is False

    no_reply = api.post(f"/api/v1/runs/{run_id}/regenerate/")  # cancelled before it wrote anything
    assert no_reply.status_code == 400 and "run" in no_reply.json()["error"]["fields"]

    run_id = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "q2"}, format="json").json()["runs"][0]["id"]
    run_now()
    regenerated = api.post(f"/api/v1/runs/{run_id}/regenerate/")
    assert regenerated.status_code == 202 and regenerated.json()["kind"] == "regenerate"
    run_now()
    reply = Message.objects.get(pk=regenerated.json()["reply_message_id"])
    assert reply.content == "First answer." and reply.data["versions"][0]["content"] == "First answer."
    continued = api.post(f"/api/v1/runs/{regenerated.json()['id']}/continue/")
    assert continued.status_code == 202 and continued.json()["kind"] == "continue"
    assert Run.objects.get(pk=continued.json()["id"]).reply_message_id == reply.pk  # streams on into the reply


def test_a_reply_takes_a_thumb_and_the_admin_lists_it(api, user, scripted, run_now, admin_client):
    from chats.services import create_chat

    chat = create_chat(owner=user, title="Q", agents=[scripted(user, reply="Answer to {prompt}")])
    question = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "life"}, format="json").json()["message"]
    run_now()
    reply = Message.objects.get(chat=chat, sender_agent__isnull=False, kind="message")
    url = f"/api/v1/chats/{chat.pk}/messages/{reply.pk}/feedback/"

    rated = api.post(url, {"rating": "down"}, format="json")
    assert rated.status_code == 200 and rated.json()["data"]["feedback"]["rating"] == "down"
    listed = admin_client.get("/admin/chats/ratedreply/?rating=down").content.decode()
    assert "Answer to life" in listed and "thumbs down" in listed
    assert "Answer to life" not in admin_client.get("/admin/chats/ratedreply/?rating=up").content.decode()

    wrong = api.post(url, {"rating": "meh"}, format="json")
    assert wrong.status_code == 400 and "rating" in wrong.json()["error"]["fields"]
    mine = api.post(f"/api/v1/chats/{chat.pk}/messages/{question['id']}/feedback/", {"rating": "up"}, format="json")
    assert mine.status_code == 400 and "message" in mine.json()["error"]["fields"]
    assert api.post(url, {"rating": None}, format="json").json()["data"].get("feedback") is None
    assert "Answer to life" not in admin_client.get("/admin/chats/ratedreply/").content.decode()
    assert Message.objects.get(pk=reply.pk).content == "Answer to life"  # the reply itself is untouched


def test_resubmit_answers_an_edited_question_again_or_for_the_first_time(api, user, scripted, run_now):
    from agents_app.models import Run
    from chats.services import create_chat

    agent = scripted(user, reply="Answer to {prompt}")
    chat = create_chat(owner=user, title="Q", agents=[agent])
    question = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "life"}, format="json").json()["message"]
    run_now()
    again = api.post(f"/api/v1/chats/{chat.pk}/messages/{question['id']}/resubmit/", {"content": "death"},
                     format="json")
    assert again.status_code == 200 and again.json()["content"] == "death"
    run_now()
    reply = Message.objects.get(chat=chat, sender_agent=agent, kind="message")
    assert reply.content == "Answer to death" and [v["content"] for v in reply.data["versions"]] == ["Answer to life"]

    note = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "n", "kind": "note"}, format="json").json()
    refused = api.post(f"/api/v1/chats/{chat.pk}/messages/{note['message']['id']}/resubmit/", {"content": "x"},
                       format="json")
    assert refused.status_code == 400 and Message.objects.get(pk=note["message"]["id"]).content == "n"

    quiet = create_chat(owner=user, title="Before any agent")
    unanswered = api.post(f"/api/v1/chats/{quiet.pk}/messages/", {"content": "hello"}, format="json").json()["message"]
    from chats.services import add_member

    add_member(chat=quiet, agent=agent)
    api.post(f"/api/v1/chats/{quiet.pk}/messages/{unanswered['id']}/resubmit/", {"content": "hello again"},
             format="json")
    assert Run.objects.filter(chat=quiet, agent=agent, trigger_message_id=unanswered["id"]).count() == 1
