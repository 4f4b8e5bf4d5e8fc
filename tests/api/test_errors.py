"""One error shape for every failure; limits; throttling; tokens in the admin."""

import pytest
from django.test import override_settings

from chats.models import Chat, Message
from hub.models import ApiToken

pytestmark = pytest.mark.django_db


def test_field_errors_name_the_field(api):
    response = api.post("/api/v1/chats/", {"title": "x" * 500, "agent_ids": "nope"}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and set(error["fields"]) == {"title", "agent_ids"}
    assert error["message"].startswith(("title:", "agent_ids:"))


def test_bad_json_wrong_media_type_and_unknown_paths(api):
    bad = api.generic("POST", "/api/v1/chats/", b"{not json", content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"
    text = api.generic("POST", "/api/v1/chats/", b"title=x", content_type="application/x-www-form-urlencoded")
    assert text.status_code == 415 and text.json()["error"]["code"] == "unsupported_media_type"
    missing = api.get("/api/v1/nothing-here/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong_method = api.put("/api/v1/chats/", {}, format="json")
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"


@override_settings(HUB_API_MAX_BODY_BYTES=2000, HUB_API_MAX_IMPORT_BYTES=50_000)
def test_body_limits_answer_413_and_imports_may_be_larger(api, user, chat):
    big = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "x" * 5000}, format="json")
    assert big.status_code == 413 and big.json()["error"]["code"] == "too_large"
    assert not Message.objects.filter(chat=chat).exists()
    export = {"format": "hub.chat", "version": 1, "chat": {"title": "Big"}, "members": [], "threads": [],
              "messages": [{"content": "y" * 10_000}]}
    assert api.post("/api/v1/chats/import/", export, format="json").status_code == 201


@override_settings(HUB_API_SEND_RATE="2/min")
def test_sends_are_throttled_per_user_and_reads_are_not(api, chat, make_user, api_for):
    url = f"/api/v1/chats/{chat.pk}/messages/"
    assert [api.post(url, {"content": "hi"}, format="json").status_code for _ in range(2)] == [201, 201]
    throttled = api.post(url, {"content": "one too many"}, format="json")
    assert throttled.status_code == 429 and throttled.json()["error"]["code"] == "throttled"
    assert int(throttled["Retry-After"]) > 0
    assert Message.objects.filter(chat=chat).count() == 2
    assert all(api.get(url).status_code == 200 for _ in range(5))
    other = api_for(make_user("someone"))  # another user has their own allowance
    other_chat = other.post("/api/v1/chats/", {"title": "mine"}, format="json").json()
    sent = other.post(f"/api/v1/chats/{other_chat['id']}/messages/", {"content": "hi"}, format="json")
    assert sent.status_code == 201


def test_tokens_are_stored_as_digests_and_a_revoked_token_is_refused(user, token_for, client):
    from rest_framework.test import APIClient

    from hub.services import revoke_api_token

    raw = token_for(user)
    stored = ApiToken.objects.get(user=user)
    assert raw not in repr(list(ApiToken.objects.values()))
    program = APIClient()
    program.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert program.get("/api/v1/chats/").status_code == 200
    revoke_api_token(token=stored)
    assert program.get("/api/v1/chats/").status_code == 401


def test_staff_make_a_token_for_a_user_in_the_admin_and_revoke_it(admin_client, user):
    response = admin_client.post("/admin/hub/apitoken/add/", {"user": user.pk, "name": "made by staff"}, follow=True)
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    token = ApiToken.objects.get(user=user, name="made by staff")
    raw = next(word for m in shown for word in m.split() if word.startswith("hub_"))
    assert token.digest not in " ".join(shown)
    from hub.services import authenticate_token

    assert authenticate_token(raw).pk == token.pk
    listing = admin_client.get("/admin/hub/apitoken/")
    assert "made by staff" in listing.content.decode() and raw not in listing.content.decode()
    admin_client.post("/admin/hub/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked_at is not None and authenticate_token(raw) is None
    assert Chat.objects.count() == 0
