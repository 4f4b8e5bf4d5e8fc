"""The chat page's JSON endpoints and its directory socket: shapes, query counts, bad input named
by field, and another user's chat as not found."""

import json
from datetime import timedelta

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.urls import reverse
from django.utils import timezone

from agents_app import remotes
from agents_app.models import Run
from chats import services
from chats.models import Chat, Membership, Message, Thread

pytestmark = pytest.mark.django_db


def post(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_state_has_every_thread_as_a_preview_and_the_latest_threads_page(logged_in, user, chat,
                                                                           django_assert_max_num_queries):
    old = Thread.objects.create(chat=chat, title="Old")
    services.send_message(chat=chat, content="old question", thread=old)
    Thread.objects.filter(pk=old.pk).update(last_activity_at=timezone.now() - timedelta(hours=2))
    Message.objects.filter(thread=old).update(created_at=timezone.now() - timedelta(hours=2))
    new = Thread.objects.create(chat=chat, title="New")
    for n in range(3):
        services.send_message(chat=chat, content=f"new {n}", thread=new)
    services.send_message(chat=chat, content="a note", thread=new, kind="note")
    services.send_message(chat=chat, content="unthreaded")
    with django_assert_max_num_queries(12):
        state = logged_in.get(reverse("chats:state", args=[chat.pk])).json()
    assert [t["title"] for t in state["threads"]] == ["Old", "New", "Main thread"]
    assert state["threads"][1]["last_message"]["content"] == "a note"
    assert state["threads"][1]["message_count"] == 4
    assert state["page"]["thread"] == "main"  # the default thread was active last
    assert [m["content"] for m in state["page"]["messages"]] == ["unthreaded"]

    one = logged_in.get(reverse("chats:messages", args=[chat.pk]), {"thread": new.pk}).json()
    assert [m["content"] for m in one["messages"]] == ["new 0", "new 1", "new 2", "a note"]
    ids = [m["id"] for m in one["messages"][:2]]
    again = logged_in.get(reverse("chats:messages", args=[chat.pk]), {"ids": ",".join(map(str, ids))}).json()
    assert [m["id"] for m in again["messages"]] == ids

    # Edits since the state was read come back to a tab that was not listening.
    services.edit_message(message=Message.objects.get(pk=ids[0]), content="new 0, edited")
    edited = logged_in.get(reverse("chats:messages", args=[chat.pk]), {"edited_after": state["now"]}).json()
    assert [m["content"] for m in edited["messages"]] == ["new 0, edited"]
    later = logged_in.get(reverse("chats:messages", args=[chat.pk]), {"edited_after": edited["now"]}).json()
    assert later["messages"] == []


def test_runs_come_with_their_messages(logged_in, user, chat, make_agent):
    agent = make_agent(user, settings={"script": {"reply": "hi"}})
    services.add_member(chat=chat, agent=agent)
    trigger = services.send_message(chat=chat, content="hello")
    run = Run.objects.get(trigger_message=trigger)
    page = logged_in.get(reverse("chats:messages", args=[chat.pk]), {"after": 0}).json()
    assert {r["id"]: r["status"] for r in page["runs"]} == {str(run.pk): "queued"}
    assert page["runs"][0]["thread_id"] is None and page["runs"][0]["trigger_message_id"] == trigger.pk


@pytest.mark.parametrize("params, field", [({"before": "x"}, "before"), ({"ids": "1,a"}, "ids"),
                                           ({"edited_after": "yesterday"}, "edited_after"),
                                           ({"edited_after": "2026-01-01T10:00:00"}, "edited_after"),
                                           ({"thread": "999999"}, None)])
def test_bad_message_queries_are_named(logged_in, chat, params, field):
    response = logged_in.get(reverse("chats:messages", args=[chat.pk]), params)
    if field is None:
        assert response.status_code == 404  # a thread of no chat of yours
    else:
        assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_directory_pages_search_and_trash(logged_in, user):
    for n in range(3):
        services.create_chat(owner=user, title=f"Chat {n}")
    gone = services.create_chat(owner=user, title="Gone")
    services.delete_chat(chat=gone)
    first = logged_in.get(reverse("chats:directory"), {"limit": 2}).json()
    assert [c["title"] for c in first["chats"]] == ["Chat 2", "Chat 1"] and first["next_cursor"]
    rest = logged_in.get(reverse("chats:directory"), {"limit": 2, "before": first["next_cursor"]}).json()
    assert [c["title"] for c in rest["chats"]] == ["Chat 0"] and rest["next_cursor"] is None
    assert [c["title"] for c in logged_in.get(reverse("chats:directory"), {"q": "chat 1"}).json()["chats"]] == [
        "Chat 1"]
    assert [c["title"] for c in logged_in.get(reverse("chats:directory"), {"trash": "1"}).json()["chats"]] == ["Gone"]
    bad = logged_in.get(reverse("chats:directory"), {"limit": 0})
    assert bad.status_code == 400 and "limit" in bad.json()["error"]["fields"]


def test_create_rename_delete_restore(logged_in, user):
    response = post(logged_in, reverse("chats:create"), {"title": "From JSON", "agents": []})
    assert response.status_code == 201
    chat_id = response.json()["chat"]["id"]
    bad = post(logged_in, reverse("chats:create"), {"title": "x" * 300})
    assert bad.status_code == 400 and "title" in bad.json()["error"]["fields"]
    assert post(logged_in, reverse("chats:create"), {"agents": [99999]}).json()["error"]["fields"] == {
        "agents": ["no agent 99999"]}

    empty = post(logged_in, reverse("chats:update", args=[chat_id]), {"title": "  "})
    assert empty.status_code == 400 and "title" in empty.json()["error"]["fields"]
    assert Chat.objects.get(pk=chat_id).title == "From JSON"  # nothing lost
    for field in ("title", "description", "picture"):
        not_text = post(logged_in, reverse("chats:update", args=[chat_id]), {field: 7})
        assert not_text.json()["error"]["fields"] == {field: ["must be text"]}
        assert post(logged_in, reverse("chats:create"), {field: ["x"]}).json()["error"]["fields"] == {
            field: ["must be text"]}
    renamed = post(logged_in, reverse("chats:update", args=[chat_id]), {"title": "Renamed", "picture": "🌱"})
    assert renamed.json()["chat"]["title"] == "Renamed" and renamed.json()["chat"]["picture"] == "🌱"

    assert post(logged_in, reverse("chats:delete", args=[chat_id])).status_code == 200
    assert logged_in.get(reverse("chats:state", args=[chat_id])).status_code == 404
    assert post(logged_in, reverse("chats:restore", args=[chat_id])).json()["chat"]["deleted_at"] is None


def test_members_remotes_and_regenerate(logged_in, user, chat, make_agent):
    agent = make_agent(user)
    assert post(logged_in, reverse("chats:member_add", args=[chat.pk]), {"agent_id": agent.pk}).status_code == 200
    assert Membership.objects.filter(chat=chat, agent=agent).exists()
    unknown = post(logged_in, reverse("chats:member_add", args=[chat.pk]), {"agent_id": "nope"})
    assert unknown.status_code == 400 and "agent_id" in unknown.json()["error"]["fields"]
    assert post(logged_in, reverse("chats:member_remove", args=[chat.pk, agent.pk])).json()["members"] == []

    remote = remotes.create_remote(owner=user, name="Tools", url="http://127.0.0.1:9/mcp", headers={"X-Key": "s3cret"})
    started = post(logged_in, reverse("chats:remote_attach", args=[chat.pk]),
                   {"remote_id": remote.pk, "new_thread_title": "With tools"})
    assert started.status_code == 201 and "s3cret" not in started.content.decode()
    thread = Thread.objects.get(chat=chat, title="With tools")
    assert started.json()["message"]["thread_id"] == thread.pk
    missing = post(logged_in, reverse("chats:remote_attach", args=[chat.pk]), {"remote_id": 424242})
    assert missing.status_code == 400 and "remote_id" in missing.json()["error"]["fields"]

    note = services.send_message(chat=chat, content="just a note", kind="note")
    refused = post(logged_in, reverse("chats:regenerate", args=[chat.pk, note.pk]))
    assert refused.status_code == 400 and "message" in refused.json()["error"]["fields"]


def test_another_users_chat_is_not_found_and_no_session_is_401(client, chat, other_user):
    client.force_login(other_user)
    for url in (reverse("chats:state", args=[chat.pk]), reverse("chats:threads", args=[chat.pk])):
        assert client.get(url).status_code == 404
    assert post(client, reverse("chats:update", args=[chat.pk]), {"title": "mine now"}).status_code == 404
    assert post(client, reverse("chats:delete", args=[chat.pk])).status_code == 404
    assert Chat.objects.get(pk=chat.pk).title == "Plans" and Chat.objects.get(pk=chat.pk).deleted_at is None
    client.logout()
    assert client.get(reverse("chats:directory")).status_code == 401


@pytest.mark.django_db(transaction=True)
async def test_the_directory_socket_carries_the_users_events(user):
    from channels.db import database_sync_to_async

    from chats.routing import websocket_urlpatterns

    tab = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/directory/")
    tab.scope["user"] = user
    connected, _ = await tab.connect(timeout=5)
    assert connected
    chat = await database_sync_to_async(services.create_chat)(owner=user, title="Fresh")
    event = await tab.receive_json_from(timeout=5)
    assert event["type"] == "directory.updated" and event["change"] == "created" and event["chat"]["id"] == str(chat.pk)
    await tab.send_json_to({"type": "message.send", "content": "no"})
    assert (await tab.receive_json_from(timeout=5))["type"] == "error"
    await tab.disconnect()


async def test_the_directory_socket_refuses_anonymous():
    from django.contrib.auth.models import AnonymousUser

    from chats.routing import websocket_urlpatterns

    tab = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/directory/")
    tab.scope["user"] = AnonymousUser()
    connected, code = await tab.connect(timeout=5)
    assert not connected and code == 4404
