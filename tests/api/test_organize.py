"""Pins, the archive, folders and tags over the API (in-process client, token auth)."""

import pytest

from chats import services
from chats.models import Chat, Folder, Tag

pytestmark = pytest.mark.django_db


def test_a_chat_is_pinned_filed_tagged_and_archived_with_its_patch(api, user):
    folder = api.post("/api/v1/folders/", {"name": "Work", "instructions": "Answer in French."}, format="json")
    assert folder.status_code == 201, folder.content
    folder = folder.json()
    assert folder["name"] == "Work" and folder["instructions"] == "Answer in French."
    chat = services.create_chat(owner=user, title="Report")
    services.create_chat(owner=user, title="Holiday")

    changed = api.patch(f"/api/v1/chats/{chat.pk}/", {"title": "Q3 report", "pinned": True, "folder": folder["id"],
                                                      "tags": ["finance", " urgent "]}, format="json")
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert body["title"] == "Q3 report" and body["pinned_at"] and body["folder_id"] == folder["id"]
    assert body["tags"] == ["finance", "urgent"]

    listed = api.get("/api/v1/chats/").json()["results"]
    assert [c["title"] for c in listed] == ["Q3 report", "Holiday"] and listed[0]["tags"] == ["finance", "urgent"]
    assert [c["title"] for c in api.get("/api/v1/chats/", {"folder": folder["id"]}).json()["results"]] == ["Q3 report"]
    assert [c["title"] for c in api.get("/api/v1/chats/", {"tag": "Finance"}).json()["results"]] == ["Q3 report"]
    tags = api.get("/api/v1/tags/").json()["results"]
    assert [(t["name"], t["chat_count"]) for t in tags] == [("finance", 1), ("urgent", 1)]

    archived = api.patch(f"/api/v1/chats/{chat.pk}/", {"archived": True, "tags": ["finance"], "folder": None},
                         format="json").json()
    assert archived["archived_at"] and archived["pinned_at"] is None and archived["folder_id"] is None
    assert [c["title"] for c in api.get("/api/v1/chats/").json()["results"]] == ["Holiday"]
    assert [c["title"] for c in api.get("/api/v1/chats/", {"archived": 1}).json()["results"]] == ["Q3 report"]
    assert [t["name"] for t in api.get("/api/v1/tags/").json()["results"]] == ["finance"]  # unused tags go
    restored = api.patch(f"/api/v1/chats/{chat.pk}/", {"archived": False}, format="json").json()
    assert restored["archived_at"] is None
    assert api.get(f"/api/v1/chats/{chat.pk}/").json()["tags"] == ["finance"]


def test_folders_are_listed_renamed_given_instructions_and_deleted_without_their_chats(api, user):
    made = api.post("/api/v1/folders/", {"name": "Garden"}, format="json").json()
    api.post("/api/v1/folders/", {"name": "Books"}, format="json")
    chat = services.create_chat(owner=user, title="Roses")
    api.patch(f"/api/v1/chats/{chat.pk}/", {"folder": made["id"]}, format="json")
    assert [f["name"] for f in api.get("/api/v1/folders/").json()["results"]] == ["Books", "Garden"]

    renamed = api.patch(f"/api/v1/folders/{made['id']}/", {"name": "Allotment", "instructions": "Metric units."},
                        format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Allotment"
    assert api.get(f"/api/v1/folders/{made['id']}/").json()["instructions"] == "Metric units."
    assert api.delete(f"/api/v1/folders/{made['id']}/").status_code == 204
    assert api.get(f"/api/v1/folders/{made['id']}/").status_code == 404
    chat.refresh_from_db()
    assert chat.folder_id is None and chat.deleted_at is None


def test_bad_input_names_its_field_and_changes_nothing(api, user):
    api.post("/api/v1/folders/", {"name": "Work"}, format="json")
    chat = services.create_chat(owner=user, title="Untouched")
    for body, field in [({"name": "work"}, "name"), ({"name": "   "}, "name"), ({"name": "x" * 101}, "name"),
                        ({}, "name"), ({"name": "Ok", "instructions": "x" * 20_001}, "instructions")]:
        refused = api.post("/api/v1/folders/", body, format="json")
        assert refused.status_code == 400 and field in refused.json()["error"]["fields"], (body, refused.content)
    for body, field in [({"pinned": "sometimes"}, "pinned"), ({"tags": "a,b"}, "tags"), ({"tags": [""]}, "tags"),
                        ({"folder": "first"}, "folder"), ({"folder": 987654}, "folder"),
                        ({"title": "Renamed", "tags": ["x" * 51]}, "tags")]:
        refused = api.patch(f"/api/v1/chats/{chat.pk}/", body, format="json")
        assert refused.status_code == 400 and field in refused.json()["error"]["fields"], (body, refused.content)
    chat.refresh_from_db()
    assert chat.title == "Untouched" and chat.pinned_at is None and chat.folder_id is None  # all or nothing
    assert not Tag.objects.exists() and Folder.objects.count() == 1
    assert api.get("/api/v1/chats/", {"before": "not-a-cursor", "archived": 1}).status_code == 400


def test_another_users_folder_tag_and_chat_are_not_found(api, user, other_user):
    theirs = services.create_chat(owner=other_user, title="Theirs")
    their_folder = services.create_folder(owner=other_user, name="Secret")
    services.tag_chat(chat=theirs, name="private")
    mine = services.create_chat(owner=user, title="Mine")

    assert api.patch(f"/api/v1/chats/{theirs.pk}/", {"pinned": True}, format="json").status_code == 404
    for method in (api.get, api.delete):
        assert method(f"/api/v1/folders/{their_folder.pk}/").status_code == 404
    assert api.patch(f"/api/v1/folders/{their_folder.pk}/", {"name": "Mine"}, format="json").status_code == 404
    assert api.get("/api/v1/chats/", {"folder": their_folder.pk}).status_code == 404
    assert api.get("/api/v1/chats/", {"tag": "private"}).status_code == 404
    refused = api.patch(f"/api/v1/chats/{mine.pk}/", {"folder": their_folder.pk}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"folder": [f"no folder {their_folder.pk}"]}
    assert api.get("/api/v1/folders/").json()["results"] == [] and api.get("/api/v1/tags/").json()["results"] == []
    theirs.refresh_from_db()
    assert theirs.pinned_at is None and Folder.objects.get(pk=their_folder.pk).name == "Secret"


def test_a_temporary_chat_is_not_organized_until_saved(api, user):
    made = api.post("/api/v1/chats/", {"title": "Fleeting", "temporary": True}, format="json").json()
    refused = api.patch(f"/api/v1/chats/{made['id']}/", {"pinned": True}, format="json")
    assert refused.status_code == 409 and "save it first" in refused.json()["error"]["message"]
    assert api.post(f"/api/v1/chats/{made['id']}/save/").status_code == 200
    assert api.patch(f"/api/v1/chats/{made['id']}/", {"pinned": True}, format="json").json()["pinned_at"]
    assert Chat.objects.get(pk=made["id"]).pinned_at is not None


def test_the_filtered_list_pages_in_few_queries(api, user, django_assert_max_num_queries):
    folder = services.create_folder(owner=user, name="F")
    for n in range(7):
        services.organize_chat(chat=services.create_chat(owner=user, title=f"Chat {n}"), folder=folder,
                               tags=["t", f"n{n}"], pinned=n == 3)
    seen, cursor = [], None
    while True:
        with django_assert_max_num_queries(9):
            page = api.get("/api/v1/chats/", {"limit": 2, "folder": folder.pk, "tag": "t",
                                              **({"before": cursor} if cursor else {})}).json()
        seen += [c["title"] for c in page["results"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["Chat 3", "Chat 6", "Chat 5", "Chat 4", "Chat 2", "Chat 1", "Chat 0"]
