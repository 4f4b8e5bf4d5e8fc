"""Remotes and provider keys over the API: secrets go in and never come out."""

import pytest

from agents_app.models import ProviderKey

pytestmark = pytest.mark.django_db


def test_remotes_are_added_attached_to_a_thread_and_removed_without_showing_their_headers(api, user, chat):
    made = api.post("/api/v1/remotes/", {"name": "Tools", "url": "http://127.0.0.1:9/mcp",
                                         "headers": {"Authorization": "Bearer top-secret"}}, format="json")
    assert made.status_code == 201 and made.json()["header_names"] == ["Authorization"]
    assert "top-secret" not in made.content.decode()
    listed = api.get("/api/v1/remotes/")
    assert [r["name"] for r in listed.json()["results"]] == ["Tools"] and "top-secret" not in listed.content.decode()
    bad = api.post("/api/v1/remotes/", {"name": "X", "url": "ftp://nope"}, format="json")
    assert bad.status_code == 400 and "url" in bad.json()["error"]["fields"]
    remote_id = made.json()["id"]
    attached = api.post(f"/api/v1/remotes/{remote_id}/attach/",
                        {"chat_id": str(chat.pk), "new_thread_title": "With tools"}, format="json")
    assert attached.status_code == 201, attached.content
    message = attached.json()["message"]
    assert message["kind"] == "resource" and message["thread_id"] and "top-secret" not in attached.content.decode()
    wrong_chat = api.post(f"/api/v1/remotes/{remote_id}/attach/", {"chat_id": "nope"}, format="json")
    assert wrong_chat.status_code == 400 and "chat_id" in wrong_chat.json()["error"]["fields"]
    assert api.delete(f"/api/v1/remotes/{remote_id}/").status_code == 204
    assert api.get("/api/v1/remotes/").json()["results"] == []


def test_provider_keys_are_stored_encrypted_and_shown_only_by_their_last_four_characters(api, user):
    saved = api.put("/api/v1/provider-keys/openai/", {"key": "sk-test-1234567890abcd"}, format="json")
    assert saved.status_code == 200 and saved.json()["hint"] == "abcd"
    assert "sk-test" not in saved.content.decode()
    assert "sk-test" not in ProviderKey.objects.get(owner=user).encrypted_key
    listed = api.get("/api/v1/provider-keys/").json()["results"]
    assert listed == [{"provider": "openai", "hint": "abcd", "created_at": listed[0]["created_at"]}]
    unknown = api.put("/api/v1/provider-keys/nobody/", {"key": "sk-test-1234567890abcd"}, format="json")
    assert unknown.status_code == 400 and "provider" in unknown.json()["error"]["fields"]
    assert api.delete("/api/v1/provider-keys/openai/").status_code == 204
    assert api.delete("/api/v1/provider-keys/openai/").status_code == 404
