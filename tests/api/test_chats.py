"""Chats, threads and members over the API (in-process client, token auth)."""

import pytest

from chats.models import Chat

pytestmark = pytest.mark.django_db


def test_create_read_update_and_list_a_chat_with_an_agent(api, user, scripted):
    agent = scripted(user)
    made = api.post("/api/v1/chats/", {"title": "Trip", "description": "Lisbon", "agent_ids": [agent.pk]},
                    format="json")
    assert made.status_code == 201, made.content
    chat = made.json()
    assert chat["title"] == "Trip" and [m["name"] for m in chat["members"]] == ["Scribe"]
    assert api.get(f"/api/v1/chats/{chat['id']}/").json()["description"] == "Lisbon"
    changed = api.patch(f"/api/v1/chats/{chat['id']}/", {"title": "Trip to Lisbon"}, format="json")
    assert changed.status_code == 200 and changed.json()["title"] == "Trip to Lisbon"
    listed = api.get("/api/v1/chats/").json()
    assert chat["id"] in [c["id"] for c in listed["results"]]
    assert api.get("/api/v1/chats/?q=lisbon").json()["results"][0]["id"] == chat["id"]
    assert api.get("/api/v1/chats/?q=madrid").json()["results"] == []


def test_the_chat_list_pages_with_a_cursor_in_few_queries(api, user, django_assert_max_num_queries):
    from chats.services import create_chat

    for i in range(5):
        create_chat(owner=user, title=f"Chat {i}")
    seen = []
    cursor = None
    while True:
        with django_assert_max_num_queries(6):
            page = api.get("/api/v1/chats/", {"limit": 2, **({"before": cursor} if cursor else {})}).json()
        seen += [c["title"] for c in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen[:5] == [f"Chat {i}" for i in (4, 3, 2, 1, 0)]
    bad = api.get("/api/v1/chats/", {"before": "nonsense"})
    assert bad.status_code == 400 and "before" in bad.json()["error"]["fields"]


def test_delete_moves_to_the_trash_and_restore_brings_it_back_with_its_members(api, user, scripted):
    from chats.services import create_chat

    chat = create_chat(owner=user, title="Old", agents=[scripted(user)])
    assert api.delete(f"/api/v1/chats/{chat.pk}/").status_code == 204
    assert api.get(f"/api/v1/chats/{chat.pk}/").status_code == 404
    trash = api.get("/api/v1/chats/?trash=true").json()["results"]
    assert [c["id"] for c in trash] == [str(chat.pk)] and trash[0]["deleted_at"]
    restored = api.post(f"/api/v1/chats/{chat.pk}/restore/")
    assert restored.status_code == 200 and [m["name"] for m in restored.json()["members"]] == ["Scribe"]
    assert Chat.objects.get(pk=chat.pk).deleted_at is None


def test_fork_export_and_import_round_trip(api, user):
    from chats.services import create_chat, send_message

    chat = create_chat(owner=user, title="Source")
    first = send_message(chat=chat, content="one")
    send_message(chat=chat, content="two", new_thread_title="Side")
    send_message(chat=chat, content="three")
    fork = api.post(f"/api/v1/chats/{chat.pk}/fork/", {"message_id": first.pk, "title": "Fork"}, format="json")
    assert fork.status_code == 201 and fork.json()["forked_from"] == str(chat.pk)
    fork_messages = api.get(f"/api/v1/chats/{fork.json()['id']}/messages/").json()["results"]
    assert [m["content"] for m in fork_messages] == ["one"]
    bad_fork = api.post(f"/api/v1/chats/{chat.pk}/fork/", {"message_id": 10**9}, format="json")
    assert bad_fork.status_code == 400 and "message_id" in bad_fork.json()["error"]["fields"]

    exported = api.get(f"/api/v1/chats/{chat.pk}/export/")
    assert exported.status_code == 200 and exported.json()["format"] == "hub.chat"
    markdown = api.get(f"/api/v1/chats/{chat.pk}/export/?format=markdown")
    assert markdown["Content-Type"].startswith("text/markdown") and "## Side" in markdown.content.decode()
    imported = api.post("/api/v1/chats/import/", exported.json(), format="json")
    assert imported.status_code == 201, imported.content
    copy = imported.json()
    assert copy["title"] == "Source" and [t["title"] for t in copy["threads"]] == ["Side"]
    copied = api.get(f"/api/v1/chats/{copy['id']}/messages/").json()["results"]
    assert [m["content"] for m in copied] == ["one", "two", "three"]
    broken = api.post("/api/v1/chats/import/", {"format": "hub.chat", "version": 1, "chat": {}, "members": [],
                                                "threads": [], "messages": [{"content": 5}]}, format="json")
    assert broken.status_code == 400 and "messages[0].content" in broken.json()["error"]["fields"]
    assert Chat.objects.filter(owner=user).count() == 3  # the broken import wrote nothing


def test_threads_and_members(api, user, scripted, make_user):
    from agents_app.services import create_agent
    from chats.services import create_chat, send_message

    chat = create_chat(owner=user, title="Team")
    send_message(chat=chat, content="kick-off", new_thread_title="Planning")
    threads = api.get(f"/api/v1/chats/{chat.pk}/threads/").json()["results"]
    assert [t["title"] for t in threads] == ["Planning"]
    assert api.get(f"/api/v1/chats/{chat.pk}/threads/{threads[0]['id']}/").json()["title"] == "Planning"
    assert api.get(f"/api/v1/chats/{chat.pk}/threads/999999/").status_code == 404

    mine = scripted(user)
    shared = create_agent(owner=None, name="Shared helper", model="test:scripted")
    strangers = scripted(make_user("bob"), name="Bob's")
    assert api.post(f"/api/v1/chats/{chat.pk}/members/", {"agent_id": mine.pk}, format="json").status_code == 201
    added = api.post(f"/api/v1/chats/{chat.pk}/members/", {"agent_id": shared.pk}, format="json")
    assert [m["name"] for m in added.json()["results"]] == ["Scribe", "Shared helper"]
    refused = api.post(f"/api/v1/chats/{chat.pk}/members/", {"agent_id": strangers.pk}, format="json")
    assert refused.status_code == 400 and "agent_id" in refused.json()["error"]["fields"]
    assert api.delete(f"/api/v1/chats/{chat.pk}/members/{mine.pk}/").status_code == 204
    assert [m["name"] for m in api.get(f"/api/v1/chats/{chat.pk}/members/").json()["results"]] == ["Shared helper"]
    assert api.delete(f"/api/v1/chats/{chat.pk}/members/{mine.pk}/").status_code == 404
