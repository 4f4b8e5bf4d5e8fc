"""Share links over the API: make, list (a chat's, all of yours), revoke; another user's is 404."""

import pytest

from chats import services
from chats.models import ShareLink

pytestmark = pytest.mark.django_db


def test_share_list_and_revoke(api, user, client):
    chat = services.create_chat(owner=user, title="Over the API")
    services.send_message(chat=chat, content="a message worth sharing")
    services.send_message(chat=chat, content="a private note", kind="note")

    made = api.post(f"/api/v1/chats/{chat.pk}/shares/", {"include_notes": True}, format="json")
    assert made.status_code == 201, made.content
    share = made.json()
    assert share["chat_id"] == str(chat.pk) and share["title"] == "Over the API"
    assert share["include_notes"] is True and share["include_memory"] is False and share["revoked_at"] is None
    page = client.get(share["url"])
    assert page.status_code == 200 and "a private note" in page.content.decode()

    plain = api.post(f"/api/v1/chats/{chat.pk}/shares/", {}, format="json").json()
    assert "a private note" not in client.get(plain["url"]).content.decode()

    listed = api.get(f"/api/v1/chats/{chat.pk}/shares/").json()
    assert [s["id"] for s in listed["results"]] == [plain["id"], share["id"]] and listed["next_cursor"] is None
    first = api.get("/api/v1/shares/?limit=1").json()
    assert [s["id"] for s in first["results"]] == [plain["id"]] and first["next_cursor"] == str(plain["id"])
    second = api.get(f"/api/v1/shares/?limit=1&before={first['next_cursor']}").json()
    assert [s["id"] for s in second["results"]] == [share["id"]] and second["next_cursor"] is None

    gone = api.delete(f"/api/v1/shares/{share['id']}/")
    assert gone.status_code == 204
    assert api.delete(f"/api/v1/shares/{share['id']}/").status_code == 204  # already revoked: still revoked
    assert client.get(share["url"]).status_code == 404
    assert [s["id"] for s in api.get("/api/v1/shares/").json()["results"]] == [plain["id"]]


def test_another_users_chat_or_link_is_404(api, api_for, user, other_user):
    chat = services.create_chat(owner=user, title="Mine")
    link = services.share_chat(chat=chat)
    theirs = api_for(other_user)

    assert theirs.post(f"/api/v1/chats/{chat.pk}/shares/", {}, format="json").status_code == 404
    assert theirs.get(f"/api/v1/chats/{chat.pk}/shares/").status_code == 404
    assert theirs.delete(f"/api/v1/shares/{link.pk}/").status_code == 404
    assert theirs.get("/api/v1/shares/").json()["results"] == []
    assert ShareLink.objects.get(pk=link.pk).revoked_at is None
    for bad in ("nope", "0", str(2**70)):
        assert api.delete(f"/api/v1/shares/{bad}/").status_code == 404


def test_bad_input_names_the_field(api, user):
    chat = services.create_chat(owner=user, title="Careful")
    bad = api.post(f"/api/v1/chats/{chat.pk}/shares/", {"include_memory": "perhaps"}, format="json")
    assert bad.status_code == 400 and "include_memory" in bad.json()["error"]["fields"]
    for query, field in (("limit=0", "limit"), ("limit=x", "limit"), ("before=-3", "before")):
        answer = api.get(f"/api/v1/shares/?{query}")
        assert answer.status_code == 400 and field in answer.json()["error"]["fields"], query
    assert not ShareLink.objects.exists()


def test_a_temporary_chat_is_refused_and_a_deleted_one_is_404(api, user):
    temporary = services.create_chat(owner=user, title="Passing", temporary=True)
    refused = api.post(f"/api/v1/chats/{temporary.pk}/shares/", {}, format="json")
    assert refused.status_code == 409 and "save it first" in refused.json()["error"]["message"]
    assert api.get(f"/api/v1/chats/{temporary.pk}/shares/").json()["results"] == []
    deleted = services.create_chat(owner=user, title="Gone")
    services.delete_chat(chat=deleted)
    assert api.post(f"/api/v1/chats/{deleted.pk}/shares/", {}, format="json").status_code == 404
    assert not ShareLink.objects.exists()


def test_the_lists_cost_a_fixed_number_of_queries(api, user, django_assert_max_num_queries):
    for n in range(12):
        services.share_chat(chat=services.create_chat(owner=user, title=f"Chat {n}"))
    with django_assert_max_num_queries(6):
        answer = api.get("/api/v1/shares/")
    assert len(answer.json()["results"]) == 12
