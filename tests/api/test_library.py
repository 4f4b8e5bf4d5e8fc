"""Memory blocks, shared documents and search over the API."""

import pytest

pytestmark = pytest.mark.django_db


def test_memory_set_append_read_and_forget(api, user):
    assert api.get("/api/v1/memory/prefs/").status_code == 404
    put = api.put("/api/v1/memory/prefs/", {"content": "Likes tea.", "max_tokens": 50}, format="json")
    assert put.status_code == 200 and put.json()["content"] == "Likes tea." and put.json()["max_tokens"] == 50
    appended = api.post("/api/v1/memory/prefs/append/", {"text": "Lives in Porto."}, format="json").json()
    assert appended["content"] == "Likes tea.\nLives in Porto." and appended["version"] == 2
    assert [e["content"] for e in appended["entries"]] == ["Likes tea.", "Lives in Porto."]
    listed = api.get("/api/v1/memory/").json()["results"]
    assert [b["label"] for b in listed] == ["prefs"]
    forgot = api.delete(f"/api/v1/memory/entries/{appended['entries'][0]['id']}/").json()
    assert forgot["content"] == "Lives in Porto."
    empty = api.post("/api/v1/memory/prefs/append/", {"text": ""}, format="json")
    assert empty.status_code == 400 and "text" in empty.json()["error"]["fields"]
    assert api.get("/api/v1/memory/prefs/").json()["content"] == "Lives in Porto."


def test_documents_index_replace_list_and_delete(api):
    made = api.post("/api/v1/documents/", {"label": "notes", "key": "a", "content": "alpha beta"}, format="json")
    assert made.status_code == 200 and made.json()["key"] == "a"
    again = api.post("/api/v1/documents/", {"label": "notes", "key": "a", "content": "gamma"}, format="json").json()
    assert again["id"] == made.json()["id"] and again["content"] == "gamma"
    api.post("/api/v1/documents/", {"label": "other", "key": "b", "content": "delta"}, format="json")
    assert [d["key"] for d in api.get("/api/v1/documents/?label=notes").json()["results"]] == ["a"]
    page = api.get("/api/v1/documents/?limit=1").json()
    assert len(page["results"]) == 1 and page["has_more"]
    assert api.get(f"/api/v1/documents/{again['id']}/").json()["content"] == "gamma"
    assert api.delete(f"/api/v1/documents/{again['id']}/").status_code == 204
    assert api.get(f"/api/v1/documents/{again['id']}/").status_code == 404


def test_search_messages_chats_and_documents(api, user):
    from chats.services import create_chat, send_message

    chat = create_chat(owner=user, title="Holiday planning", description="Summer")
    send_message(chat=chat, content="Book the ferry to Madeira")
    api.post("/api/v1/documents/", {"label": "kb", "key": "ferries", "content": "Ferry times to Madeira"},
             format="json")
    hits = api.get("/api/v1/search/messages/", {"q": "madeira ferr"}).json()["results"]
    assert hits[0]["chat_id"] == str(chat.pk) and "[[" in hits[0]["snippet"]
    assert api.get("/api/v1/search/chats/", {"q": "holiday"}).json()["results"][0]["chat_title"] == "Holiday planning"
    docs = api.get("/api/v1/search/documents/", {"q": "madeira", "label": "kb"}).json()["results"]
    assert [d["key"] for d in docs] == ["ferries"]
    missing = api.get("/api/v1/search/messages/")
    assert missing.status_code == 400 and "q" in missing.json()["error"]["fields"]
    assert api.get("/api/v1/search/messages/", {"q": '"(*) AND'}).status_code == 200  # never syntax
