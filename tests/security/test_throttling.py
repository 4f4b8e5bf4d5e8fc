"""Failed log-ins, token attempts and sign-ups are limited per username and per client address.

The counts live in the cache (Redis when REDIS_URL is set), so every web process shares them.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from hub import throttle

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pass-for-tests-1"


@pytest.fixture(autouse=True)
def _fresh_counts():
    """In embedded mode the cache is this process's memory, which nothing else clears. (The
    suite's fast password hasher, tests/conftest.py, keeps five log-ins well inside the short
    windows these tests set.)"""
    cache.clear()
    yield
    cache.clear()


def log_in(username, password, address="127.0.0.1", client=None, **headers):
    client = client or Client()
    return client.post(reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address, **headers)


def logged_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == reverse("chats:list")


def test_the_sixth_try_is_refused_even_with_the_right_password_and_accepted_after_the_window(user, settings):
    settings.HUB_THROTTLE_WINDOW_SECONDS = 2
    for _ in range(4):
        response = log_in("alice", "wrong-password")
        assert response.status_code == 200 and b"Please enter a correct username and password" in response.content
    fifth = log_in("alice", "wrong-password")
    assert fifth.status_code == 429 and b"Too many failed log-ins. Try again in 2 seconds." in fifth.content

    sixth = log_in("alice", PASSWORD)
    assert sixth.status_code == 429 and not logged_in(sixth)
    assert b"Try again in" in sixth.content and sixth["Retry-After"] in {"1", "2"}
    assert "_auth_user_id" not in sixth.client.session

    time.sleep(2.1)
    assert logged_in(log_in("alice", PASSWORD))


def test_the_username_is_locked_whatever_address_or_case_the_guesses_come_from(user):
    for n in range(5):
        log_in("Alice" if n % 2 else "alice", "wrong-password", address=f"10.0.0.{n}")
    refused = log_in("alice", PASSWORD, address="10.0.9.9")
    assert refused.status_code == 429 and not logged_in(refused)


def test_one_address_is_locked_for_every_username(user, make_user):
    for n in range(5):
        log_in(f"someone{n}", "wrong-password", address="203.0.113.7")
    assert log_in("alice", PASSWORD, address="203.0.113.7").status_code == 429
    assert logged_in(log_in("alice", PASSWORD, address="203.0.113.8"))


def test_a_success_resets_the_usernames_count(user):
    for n in range(4):
        log_in("alice", "wrong-password", address=f"10.1.0.{n}")
    assert logged_in(log_in("alice", PASSWORD, address="10.1.1.1"))
    for n in range(4):
        assert log_in("alice", "wrong-password", address=f"10.2.0.{n}").status_code == 200
    assert logged_in(log_in("alice", PASSWORD, address="10.1.1.1"))


def test_an_empty_password_is_not_counted_as_a_guess(user):
    for _ in range(6):
        assert log_in("alice", "").status_code == 200
    assert logged_in(log_in("alice", PASSWORD))


def test_each_further_lock_doubles_up_to_the_cap(settings):
    settings.HUB_THROTTLE_WINDOW_SECONDS = 10
    settings.HUB_THROTTLE_MAX_LOCK_SECONDS = 25
    rule = throttle.LOGIN_BY_ADDRESS
    locks = []
    for _ in range(3):
        started = [rule.record("198.51.100.1") for _ in range(5)]
        assert started[:4] == [0, 0, 0, 0]
        locks.append(started[4])
    assert locks == [10, 20, 25]
    assert 24 <= rule.seconds_locked("198.51.100.1") <= 25
    assert rule.seconds_locked("198.51.100.2") == 0


def test_behind_a_proxy_the_right_most_forwarded_address_is_counted(user, settings):
    settings.HUB_BEHIND_PROXY = True
    for n in range(5):
        # What a client writes into X-Forwarded-For itself (the left part) changes nothing.
        log_in(f"someone{n}", "wrong-password", HTTP_X_FORWARDED_FOR=f"1.1.1.{n}, 198.51.100.20")
    assert log_in("alice", PASSWORD, HTTP_X_FORWARDED_FOR="9.9.9.9, 198.51.100.20").status_code == 429
    assert logged_in(log_in("alice", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.20, 198.51.100.21"))


def test_without_the_proxy_setting_forwarded_headers_are_ignored(user, settings):
    settings.HUB_BEHIND_PROXY = False
    for n in range(5):
        log_in(f"someone{n}", "wrong-password", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    assert log_in("alice", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.99").status_code == 429


def test_failed_tokens_lock_the_address_with_429_in_the_error_shape(user, settings):
    from hub.services import create_api_token

    settings.HUB_THROTTLE_WINDOW_SECONDS = 2
    settings.HUB_TOKEN_FAILURE_LIMIT = 5
    _, good = create_api_token(user=user, name="script")
    api = Client()
    for _ in range(5):
        bad = api.get("/api/v1/chats/", HTTP_AUTHORIZATION="Bearer hub_not-a-real-token")
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "authentication_failed"

    refused = api.get("/api/v1/chats/", HTTP_AUTHORIZATION=f"Bearer {good}")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    body = refused.json()["error"]
    assert body["code"] == "throttled" and "Too many failed token attempts" in body["message"]
    assert body["fields"] == {}
    other_address = api.get("/api/v1/chats/", HTTP_AUTHORIZATION=f"Bearer {good}", REMOTE_ADDR="10.3.0.1")
    assert other_address.status_code == 200

    time.sleep(2.1)
    assert api.get("/api/v1/chats/", HTTP_AUTHORIZATION=f"Bearer {good}").status_code == 200


def test_a_malformed_authorization_header_counts_as_a_failed_attempt(settings):
    settings.HUB_TOKEN_FAILURE_LIMIT = 3
    api = Client()
    for _ in range(3):
        assert api.get("/api/v1/chats/", HTTP_AUTHORIZATION="Bearer").status_code == 401
    assert api.get("/api/v1/chats/", HTTP_AUTHORIZATION="Bearer hub_x").status_code == 429


def test_sign_ups_from_one_address_are_limited(settings):
    settings.HUB_ALLOW_SIGNUP = True
    from django.contrib.auth import get_user_model

    for n in range(5):
        made = Client().post(reverse("signup"), {"username": f"newcomer{n}", "password1": "a-long-pass-9",
                                                 "password2": "a-long-pass-9"})
        assert made.status_code == 302
    refused = Client().post(reverse("signup"), {"username": "newcomer5", "password1": "a-long-pass-9",
                                                "password2": "a-long-pass-9"})
    assert refused.status_code == 429 and b"Too many sign-ups from your address. Try again in" in refused.content
    assert int(refused["Retry-After"]) >= 1
    assert not get_user_model().objects.filter(username="newcomer5").exists()
    elsewhere = Client().post(reverse("signup"), {"username": "newcomer5", "password1": "a-long-pass-9",
                                                  "password2": "a-long-pass-9"}, REMOTE_ADDR="10.4.0.1")
    assert elsewhere.status_code == 302


@pytest.mark.needs_redis
def test_another_process_sees_the_lock():
    for n in range(5):
        log_in(f"someone{n}", "wrong-password", address="192.0.2.44")
    # A separate Python process with the same settings, as a second web process would be.
    check = ("import django; django.setup(); from hub import throttle; "
             "print(throttle.LOGIN_BY_ADDRESS.seconds_locked('192.0.2.44'), "
             "throttle.LOGIN_BY_ADDRESS.seconds_locked('192.0.2.45'))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hub.settings"}
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    # The lock runs down while the process starts (seconds, on a loaded machine): it must show
    # what is left of the minute, not a fixed figure.
    elapsed = time.monotonic() - started
    locked, free = result.stdout.split()
    assert 60 - elapsed - 1 <= int(locked) <= 60 and free == "0"
