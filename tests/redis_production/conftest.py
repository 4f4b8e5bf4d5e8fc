"""A real hub (`manage.py runhub`, Daphne with its Celery worker and beat) pointed at a private
Redis, and a conversation with it over the REST API that uses every Redis client of the hub."""

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import websockets.sync.client as ws_client
from django.db import connection

from tests.api.sse_client import read_events
from tests.chaos.cluster import free_port, test_database_url

ROOT = Path(__file__).resolve().parents[2]
USER_PASSWORD = "a-password-for-the-hub-1"
REDIS_SETTINGS = {"REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}


def hub_env(log_dir: Path, redis_env: dict) -> dict:
    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k not in REDIS_SETTINGS and not k.startswith("HUB_")}
    if connection.settings_dict["ENGINE"].endswith("sqlite3"):
        env["HUB_SQLITE_NAME"] = str(connection.settings_dict["NAME"])
    else:
        env["DATABASE_URL"] = test_database_url()
    env.update({"HUB_DATA_DIR": str(log_dir / "var"), "SECRET_KEY": settings.SECRET_KEY, "DEBUG": "false",
                "ALLOWED_HOSTS": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO",
                "HUB_API_SEND_RATE": "10000/min", **redis_env})
    return env


@contextlib.contextmanager
def running_hub(log_dir: Path, redis_env: dict, *, concurrency: int = 2):
    """runhub on the test database and the given Redis settings; yields (base URL, log path)."""
    log_path = log_dir / "runhub.log"
    port = free_port()
    argv = [sys.executable, "manage.py", "runhub", "--port", str(port), "--concurrency", str(concurrency)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=hub_env(log_dir, redis_env), stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(base):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the hub did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.2)
        yield base, log_path
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/api/v1/schema/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_hub_expecting_failure(log_dir: Path, redis_env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "runhub", "--port", str(free_port())], cwd=ROOT,
                          env=hub_env(log_dir, redis_env), capture_output=True, text=True, timeout=90)


@pytest.fixture
def speaker(user, make_agent, real_password_hashers):
    """A user (who can log in to the hub's process), their API token and an agent that answers
    in small pieces (several deltas)."""
    from hub.services import create_api_token

    user.set_password(USER_PASSWORD)
    user.save()
    agent = make_agent(user, name="Scribe", model="test:scripted",
                       settings={"script": {"reply": "Hello {prompt}, the stream reached its end.", "chunk": 4,
                                            "delay": 0.06}})
    return {"username": user.username, "token": create_api_token(user=user, name="redis tests")[1], "agent": agent}


def converse(base: str, speaker: dict, word: str) -> None:
    """In a tab of a new chat (a websocket: the channel layer's groups, the delta feed), send
    `word`; the agent's reply (the broker, the replay buffer) streams into the tab to its end. Then
    the same over the API in a temporary chat (its store), read as Server-Sent Events."""
    with open_tab(base, speaker, f"About {word}") as tab:
        tab.send(json.dumps({"type": "message.send", "content": word, "client_id": "c-1"}))
        deltas, settled = read_reply(tab)
    assert settled["content"] == f"Hello {word}, the stream reached its end."
    assert len(deltas) >= 3 and "".join(deltas) == settled["content"]  # streamed, piece by piece
    _converse_over_the_api(base, speaker, f"{word} again")


@contextlib.contextmanager
def open_tab(base: str, speaker: dict, title: str):
    """A websocket of a new chat with the agent, as the chat page opens it."""
    with _logged_in(base, speaker["username"]) as browser:
        made = browser.post("/api/v1/chats/", json={"title": title, "agent_ids": [speaker["agent"].pk]},
                            headers={"X-CSRFToken": browser.cookies["csrftoken"], "Referer": f"{base}/"})
        assert made.status_code == 201, made.text
        cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    url = f"ws{base.removeprefix('http')}/ws/chats/{made.json()['id']}/"
    with ws_client.connect(url, origin=base, additional_headers={"Cookie": cookie}) as tab:
        yield tab


@contextlib.contextmanager
def _logged_in(base: str, username: str):
    with httpx.Client(base_url=base, timeout=20) as browser:
        browser.get("/login/")
        answer = browser.post("/login/", data={"username": username, "password": USER_PASSWORD,
                                               "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                              headers={"Referer": f"{base}/login/"})
        assert answer.status_code == 302, answer.text
        yield browser


def read_reply(tab) -> tuple[list[str], dict]:
    deltas = []
    while True:
        event = json.loads(tab.recv(timeout=30))
        if event["type"] == "message.delta" and event.get("part", "text") == "text":
            deltas.append(event["text"])
        elif event["type"] == "message.settled" and event["message"]["sender"]["type"] == "agent":
            return deltas, event["message"]


def _converse_over_the_api(base: str, speaker: dict, words: str) -> None:
    with httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {speaker['token']}"}) as http:
        made = http.post("/api/v1/chats/", json={"title": "Off the record", "agent_ids": [speaker["agent"].pk],
                                                 "temporary": True})
        assert made.status_code == 201, made.text
        with http.stream("POST", f"/api/v1/chats/{made.json()['id']}/messages/?stream=true",
                         json={"content": words}) as response:
            assert response.status_code == 200, response.read()
            events = list(read_events(response))
    assert events[-1].type == "end", [e.type for e in events]
    assert [run["status"] for run in events[-1].data["runs"]] == ["succeeded"], events[-1].data
    settled = next(e for e in events if e.type == "message.settled").data["message"]
    assert settled["content"] == f"Hello {words}, the stream reached its end."


def assert_every_client_used(server_client) -> None:
    """The broker (kombu's bindings), the temporary chats' store (its keys), the channel layer (its
    groups), the replay buffer (its script, which publishes the deltas) and the delta feed (its
    subscriber, named) all worked on this Redis."""
    keys = {key.decode() for key in server_client.scan_iter(count=1000)}
    assert any(k.startswith("_kombu.binding.") for k in keys), keys
    stats = server_client.info("commandstats")
    assert stats.get("cmdstat_zadd", {}).get("calls", 0) > 0, "no channel-layer group was joined"
    assert stats.get("cmdstat_evalsha", {}).get("calls", 0) > 0, "the replay buffer's script never ran"
    assert stats.get("cmdstat_publish", {}).get("calls", 0) > 0, "no delta was published"
    assert "hub-delta-feed" in {client["name"] for client in server_client.client_list()}
    assert any(k.startswith("hub:temp:") for k in keys), keys  # the temporary chats' store
