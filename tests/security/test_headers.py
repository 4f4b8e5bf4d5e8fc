"""Response headers and cookie flags, with HUB_HTTPS off (the default) and on, and behind a proxy.

The environment-to-settings step is checked by importing hub.settings in a fresh interpreter with
the variables set, as `daphne` would start; the settings it derives are then applied to this
process (override_settings) and real requests go through the whole middleware stack.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parents[2]
YEAR = 365 * 24 * 3600
TLS_SETTINGS = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_SSL_REDIRECT",
                "SECURE_PROXY_SSL_HEADER", "SECURE_CONTENT_TYPE_NOSNIFF", "SECURE_REFERRER_POLICY",
                "X_FRAME_OPTIONS", "HUB_HTTPS", "HUB_BEHIND_PROXY"]
PASSWORD = "pass-for-tests-1"  # the `user` fixture's


def settings_from_environment(tmp_path, **env) -> dict:
    """The TLS settings hub.settings derives from these environment variables (and no others of ours)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "SECURE_"))}
    environ.update(HUB_DATA_DIR=str(tmp_path), SECRET_KEY="headers-test-" + "x" * 40, **env)
    code = ("import json, hub.settings as s; "
            f"print(json.dumps({{name: getattr(s, name) for name in {TLS_SETTINGS!r}}}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=60, check=True)
    derived = json.loads(done.stdout.strip().splitlines()[-1])
    if derived["SECURE_PROXY_SSL_HEADER"] is not None:
        derived["SECURE_PROXY_SSL_HEADER"] = tuple(derived["SECURE_PROXY_SSL_HEADER"])
    return derived


def directives(response) -> dict[str, list[str]]:
    policy = response.headers["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


def log_in(client, user, **extra):
    """The log-in form, as a browser submits it; returns the answer that sets the session cookie."""
    response = client.post("/login/", {"username": user.username, "password": PASSWORD}, **extra)
    assert response.status_code == 302, "the log-in was refused"
    return response


@pytest.mark.django_db
def test_every_page_has_a_policy_with_no_inline_script_and_its_own_websocket(client, user):
    pages = [client.get("/login/"), client.get("/no-such-page/"), client.get("/api/v1/docs/")]
    client.force_login(user)
    pages += [client.get("/"), client.get("/agents/"), client.get("/settings/tokens/")]
    for response in pages:
        policy = directives(response)
        assert policy["script-src"] == ["'self'"], response.request["PATH_INFO"]
        assert policy["style-src"] == ["'self'"]
        assert policy["default-src"] == ["'self'"]
        assert policy["object-src"] == ["'none'"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert policy["base-uri"] == ["'self'"] and policy["form-action"] == ["'self'"]
        assert policy["connect-src"] == ["'self'", "ws://testserver"]
        assert {"http:", "https:", "data:"} <= set(policy["img-src"])  # avatars at any address
    assert directives(client.get("/", secure=True))["connect-src"] == ["'self'", "wss://testserver"]


@pytest.mark.django_db
def test_api_docs_load_their_start_up_script_from_a_file(client):
    page = client.get("/api/v1/docs/").content.decode()
    assert "<script>" not in page and "<style>" not in page
    script = client.get("/api/v1/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in script.content.decode()


def test_https_is_off_unless_asked_for(tmp_path):
    derived = settings_from_environment(tmp_path)
    assert derived["HUB_HTTPS"] is False and derived["HUB_BEHIND_PROXY"] is False
    assert derived["SESSION_COOKIE_SECURE"] is False and derived["CSRF_COOKIE_SECURE"] is False
    assert derived["SECURE_HSTS_SECONDS"] == 0 and derived["SECURE_SSL_REDIRECT"] is False
    assert derived["SECURE_PROXY_SSL_HEADER"] is None
    assert derived["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert derived["SECURE_REFERRER_POLICY"] == "same-origin" and derived["X_FRAME_OPTIONS"] == "DENY"


def test_hsts_seconds_may_be_set(tmp_path):
    derived = settings_from_environment(tmp_path, HUB_HTTPS="true", HUB_HSTS_SECONDS="300")
    assert derived["SECURE_HSTS_SECONDS"] == 300


@pytest.mark.django_db
def test_plain_http_cookies_are_not_secure_and_no_hsts_is_sent(client, user):
    page = client.get("/login/")
    assert page.status_code == 200
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Referrer-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in page.headers
    assert not page.cookies[settings.CSRF_COOKIE_NAME]["secure"]
    assert not log_in(client, user).cookies[settings.SESSION_COOKIE_NAME]["secure"]


@pytest.mark.django_db
def test_with_hub_https_cookies_are_secure_hsts_is_sent_and_plain_http_redirects(tmp_path, user):
    derived = settings_from_environment(tmp_path, HUB_HTTPS="true")
    assert derived["SECURE_HSTS_SECONDS"] == YEAR
    with override_settings(**derived):
        client = Client()
        plain = client.get("/login/")
        assert plain.status_code == 301 and plain.headers["Location"] == "https://testserver/login/"
        assert client.get("/healthz").status_code in (200, 503)  # load balancers probe it plainly

        page = client.get("/login/", secure=True)
        assert page.status_code == 200
        assert page.headers["Strict-Transport-Security"] == f"max-age={YEAR}"
        assert page.cookies[settings.CSRF_COOKIE_NAME]["secure"]
        assert log_in(client, user, secure=True).cookies[settings.SESSION_COOKIE_NAME]["secure"]
        assert directives(page)["connect-src"] == ["'self'", "wss://testserver"]


@pytest.mark.django_db
def test_behind_a_proxy_x_forwarded_proto_says_the_request_was_https(tmp_path, user):
    derived = settings_from_environment(tmp_path, HUB_HTTPS="true", HUB_BEHIND_PROXY="1")
    assert derived["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    with override_settings(**derived):
        client = Client()
        # The proxy ended TLS and forwards plain HTTP (with the browser's Host, as a browser always
        # sends one): no redirect loop, HTTPS headers and cookies.
        proxied = {"X-Forwarded-Proto": "https", "Host": "testserver"}
        page = client.get("/login/", headers=proxied)
        assert page.status_code == 200
        assert page.headers["Strict-Transport-Security"] == f"max-age={YEAR}"
        assert directives(page)["connect-src"] == ["'self'", "wss://testserver"]
        assert log_in(client, user, headers=proxied).cookies[settings.SESSION_COOKIE_NAME]["secure"]
        # A request the proxy says came over plain HTTP is sent to HTTPS.
        assert client.get("/login/", headers={"X-Forwarded-Proto": "http"}).status_code == 301


@pytest.mark.django_db
def test_without_hub_behind_proxy_a_forged_x_forwarded_proto_changes_nothing(client):
    page = client.get("/login/", headers={"X-Forwarded-Proto": "https"})
    assert "Strict-Transport-Security" not in page.headers
    assert directives(page)["connect-src"] == ["'self'", "ws://testserver"]
