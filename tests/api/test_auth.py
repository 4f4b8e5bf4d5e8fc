"""Credentials over real HTTP: tokens made and revoked on the settings page, the session with CSRF."""

import re

import httpx
import pytest

from hub.models import ApiToken

# The users log in to a hub in another process, which checks passwords with the real hashers.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("real_password_hashers")]


def log_in(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=20)
    client.get("/login/")
    response = client.post("/login/", data={"username": username, "password": password,
                                            "csrfmiddlewaretoken": client.cookies["csrftoken"]},
                           headers={"Referer": f"{base}/login/"})
    assert response.status_code == 302, response.text
    return client


def test_a_token_made_on_the_settings_page_is_shown_once_works_and_stops_at_once_when_revoked(live_hub, user):
    browser = log_in(live_hub, "alice", "pass-for-tests-1")
    page = browser.post("/settings/tokens/", data={"name": "backup script",
                                                   "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                        headers={"Referer": f"{live_hub}/settings/tokens/"})
    assert page.status_code == 200
    token = re.search(r'value="(hub_[^"]+)"', page.text).group(1)
    stored = ApiToken.objects.get(user=user)
    assert stored.name == "backup script" and token not in (stored.digest, stored.prefix)
    assert stored.last_used_at is None
    again = browser.get("/settings/tokens/")
    assert token not in again.text and stored.prefix in again.text  # shown once; recognisable after

    program = httpx.Client(base_url=live_hub, headers={"Authorization": f"Bearer {token}"}, timeout=20)
    made = program.post("/api/v1/chats/", json={"title": "From a script"})
    assert made.status_code == 201
    stored.refresh_from_db()
    assert stored.last_used_at is not None
    assert "never" not in browser.get("/settings/tokens/").text

    revoked = browser.post(f"/settings/tokens/{stored.pk}/revoke/",
                           data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                           headers={"Referer": f"{live_hub}/settings/tokens/"})
    assert revoked.status_code == 302
    refused = program.get("/api/v1/chats/")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "authentication_failed"
    assert program.post("/api/v1/chats/", json={"title": "after revoke"}).status_code == 401


def test_missing_or_bad_credentials_answer_401_in_the_error_shape(http):
    missing = http.get("/api/v1/chats/")
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"].startswith("Bearer")
    assert missing.json()["error"]["code"] == "not_authenticated"
    bad = http.get("/api/v1/chats/", headers={"Authorization": "Bearer hub_not-a-real-token"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "authentication_failed"
    malformed = http.get("/api/v1/chats/", headers={"Authorization": "Bearer"})
    assert malformed.status_code == 401


def test_the_browser_session_works_and_needs_the_csrf_token_to_write(live_hub, user):
    browser = log_in(live_hub, "alice", "pass-for-tests-1")
    assert browser.get("/api/v1/chats/").status_code == 200
    refused = browser.post("/api/v1/chats/", json={"title": "no csrf"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    made = browser.post("/api/v1/chats/", json={"title": "with csrf"},
                        headers={"X-CSRFToken": browser.cookies["csrftoken"], "Referer": f"{live_hub}/"})
    assert made.status_code == 201


def test_an_oversized_body_answers_413_and_stores_nothing(http, user, token_for):
    from chats.models import Chat

    response = http.post("/api/v1/chats/", content=b'{"title": "' + b"x" * (2 * 1024 * 1024) + b'"}',
                         headers={"Authorization": f"Bearer {token_for(user)}", "Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
    assert not Chat.objects.filter(owner=user).exists()
