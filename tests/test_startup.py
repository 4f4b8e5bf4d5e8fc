"""Start-up as a person runs it: real processes, real HTTP and websockets against `runhub`."""

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import websockets.sync.client as ws_client

from tests.chaos.cluster import free_port

ROOT = Path(__file__).resolve().parent.parent


def clean_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({"HUB_DATA_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def manage(*args, env, timeout=60):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({"DATABASE_URL": "mysql://nope"}, "DATABASE_URL must start with postgres://"),
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:1/hub"}, "the database does not answer"),
        ({"REDIS_URL": "http://localhost"}, "REDIS_URL must start with redis://"),
        ({"REDIS_URL": "redis://127.0.0.1:1/0"}, "Redis at REDIS_URL does not answer"),
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
    ],
)
def test_a_bad_setting_stops_start_up_with_one_line(tmp_path, variables, expected):
    result = manage("runhub", "--port", str(free_port()), env=clean_env(tmp_path, **variables))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Hub cannot start:") and expected in lines[0]
    assert "Traceback" not in result.stderr


@pytest.fixture
def running_hub(tmp_path):
    """`make run` as a person runs it: migrate, ensure_admin, runhub — embedded mode."""
    env = clean_env(tmp_path)
    assert manage("migrate", "--noinput", "-v", "0", env=env, timeout=120).returncode == 0
    first = manage("ensure_admin", env=env)
    password = re.search(r"password: (\S+)", first.stdout).group(1)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runhub", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/login/", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("runhub did not serve the log-in page: " + (process.stdout.read() if process.stdout else ""))
    yield {"base": base, "password": password, "process": process, "env": env}
    if process.poll() is None:
        process.kill()
        process.wait(10)


def log_in(base, username, password) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=10)
    client.get("/login/")
    response = client.post(
        "/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{base}/login/"},
    )
    assert response.status_code == 302, response.text
    return client


def test_first_run_admin_creates_a_chat_and_a_second_tab_sees_the_message_live(running_hub):
    base = running_hub["base"]
    client = log_in(base, "admin", running_hub["password"])
    created = client.post(
        "/chats/new/",
        data={"title": "Hello hub", "csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": f"{base}/"},
    )
    assert created.status_code == 302
    chat_id = created.headers["location"].rstrip("/").split("/")[-1]
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    ws_url = f"ws://127.0.0.1:{base.rsplit(':', 1)[1]}/ws/chats/{chat_id}/"
    headers = {"Cookie": cookie}
    with ws_client.connect(ws_url, origin=base, additional_headers=headers) as tab1, \
            ws_client.connect(ws_url, origin=base, additional_headers=headers) as tab2:
        tab1.send(json.dumps({"type": "message.send", "content": "live hello", "client_id": "c-1"}))
        for tab in (tab1, tab2):
            while True:
                event = json.loads(tab.recv(timeout=10))
                if event["type"] == "message.created":
                    break
            assert event["message"]["content"] == "live hello"
            assert event["client_id"] == "c-1"
    page = client.get(f"/chats/{chat_id}/")
    assert "live hello" in page.text


def test_ctrl_c_stops_runhub_cleanly(running_hub):
    import signal

    process = running_hub["process"]
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    assert "Hub stopped." in output
    assert "Traceback" not in output


def test_second_run_does_not_create_another_admin(running_hub):
    again = manage("ensure_admin", env=running_hub["env"])
    assert again.returncode == 0
    assert running_hub["password"] in again.stdout  # the same account, shown again


def start_runhub(env, port):
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runhub", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login/", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    pytest.fail("runhub did not start")


def shell(env, code: str) -> str:
    result = manage("shell", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_killing_the_hub_mid_reply_continues_the_reply_after_restart(running_hub):
    """SIGKILL `runhub` while an agent streams; the next start recovers and finishes the reply."""
    import signal

    env, base = running_hub["env"], running_hub["base"]
    reply_text = " ".join(f"word{i}" for i in range(120))
    chat_id = shell(env, (
        "from django.contrib.auth.models import User; from agents_app.services import create_agent; "
        f"a = create_agent(owner=User.objects.get(username='admin'), name='Slow', model='test:scripted', "
        f"settings={{'script': {{'reply': {reply_text!r}, 'chunk': 6, 'delay': 0.03}}}}); print(a.main_chat_id)"
    ))
    client = log_in(base, "admin", running_hub["password"])
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    port = int(base.rsplit(":", 1)[1])
    ws_url = f"ws://127.0.0.1:{port}/ws/chats/{chat_id}/"
    with ws_client.connect(ws_url, origin=base, additional_headers={"Cookie": cookie}) as tab:
        tab.send(json.dumps({"type": "message.send", "content": "go"}))
        streamed = 0
        while streamed < 150:
            event = json.loads(tab.recv(timeout=10))
            if event["type"] == "message.delta":
                streamed = event["offset"] + len(event["text"])
        time.sleep(0.4)  # let a checkpoint land
        running_hub["process"].send_signal(signal.SIGKILL)
        running_hub["process"].wait(10)

    restarted = start_runhub(env, port)
    try:
        code = (
            "from chats.models import Message; import time\n"
            "for _ in range(300):\n"
            "    m = Message.objects.filter(sender_agent__name='Slow', kind='message').first()\n"
            "    if m and m.status == 'final': break\n"
            "    time.sleep(0.1)\n"
            "print(repr((m.status, m.content, Message.objects.filter(sender_agent__name='Slow', kind='message')"
            ".count())))"
        )
        status, content, count = ast.literal_eval(shell(env, code))
        assert (status, content, count) == ("final", reply_text, 1)
    finally:
        restarted.kill()
        restarted.wait(10)
