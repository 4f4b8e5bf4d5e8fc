"""Start-up as a person runs it: real processes, real HTTP and websockets against `runhub`."""

import ast
import json
import logging
import os
import re
import signal
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
    # PYTHONFAULTHANDLER: a hub that does not stop on Ctrl-C is aborted, and prints every thread's
    # stack as it dies (abort_and_explain).
    env.update({"HUB_DATA_DIR": str(tmp_path / "var"), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}, **extra)
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
    """`make run` as a person runs it: migrate, ensure_admin, runhub — embedded mode.

    The tests on it are marked `serial` (they run after the parallel part of `make test`): the hub
    must serve within 30 s of its start, which the parallel part's load on two cores exceeded."""
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


@pytest.mark.serial
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


@pytest.mark.serial
def test_ctrl_c_stops_runhub_cleanly(running_hub):
    process = running_hub["process"]
    process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        abort_and_explain(process, lambda: process.communicate(timeout=10)[0])
    assert process.returncode == 0, output
    assert "Hub stopped." in output
    assert "Traceback" not in output


@pytest.mark.serial
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


@pytest.mark.serial
def test_killing_the_hub_mid_reply_continues_the_reply_after_restart(running_hub):
    """SIGKILL `runhub` while an agent streams; the next start recovers and finishes the reply."""
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


# --- runhub keeps its worker --------------------------------------------------------------------
# A Celery worker ends on any "Unrecoverable error". A real one: a message on the queue that kombu
# cannot decode (anything with write access to the broker can put one there). runhub starts its
# worker again; turns sent afterwards are answered.

UNREADABLE = "not a task message"


def wait_until(predicate, *, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
    return value


class Said(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def put_unreadable_message(app) -> None:
    """On the worker's queue, whichever broker it uses (in-memory embedded, or Redis)."""
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        if connection.transport.driver_type == "redis":
            channel.client.lpush(app.conf.task_default_queue, UNREADABLE)
        else:
            channel._put(app.conf.task_default_queue, UNREADABLE)


@pytest.mark.django_db(transaction=True)  # the worker's threads read what the test wrote
def test_the_in_process_worker_is_started_again_when_it_dies(user, make_agent):
    from chats.models import Message
    from chats.services import send_message
    from hub.celery import app
    from hub.embedded import EmbeddedWorker

    said = Said()
    logging.getLogger("hub.embedded").addHandler(said)  # its own: a Celery worker takes over the root logger
    agent = make_agent(user, name="Steady", settings={"script": {"reply": "Answered: {prompt}"}})

    def answered(prompt: str) -> bool:
        return Message.objects.filter(sender_agent=agent, status="final", content=f"Answered: {prompt}").exists()

    app.control.purge()  # tasks other tests left on the broker
    worker = EmbeddedWorker(concurrency=1)
    worker.start()
    try:
        send_message(chat=agent.main_chat, content="before")
        wait_until(lambda: answered("before"), timeout=30, what="the first turn")
        put_unreadable_message(app)
        wait_until(lambda: worker.restarts == 1, timeout=30, what="the worker to be started again")
        assert any("stopped on its own" in line for line in said.lines)
        send_message(chat=agent.main_chat, content="after")
        wait_until(lambda: answered("after"), timeout=30, what="a turn answered by the new worker")
    finally:
        worker.stop()
        logging.getLogger("hub.embedded").removeHandler(said)
    assert not worker.thread.is_alive()


@pytest.mark.needs_redis
def test_runhub_logs_its_worker_dying_and_answers_turns_after_it_comes_back(tmp_path):
    import redis

    from tests.chaos.redis_server import RedisServer

    server = RedisServer(tmp_path).start()  # its own: the test puts a bad message on the queue
    env = clean_env(tmp_path, REDIS_URL=server.url())
    log_path = tmp_path / "runhub.log"
    process = None
    try:
        assert manage("migrate", "--noinput", "-v", "0", env=env, timeout=120).returncode == 0
        chat_id, token = shell(env, (
            "from django.contrib.auth.models import User; from agents_app.services import create_agent; "
            "from hub.services import create_api_token; u = User.objects.create_user('ann', password='x'); "
            "a = create_agent(owner=u, name='Steady', model='test:scripted', "
            "settings={'script': {'reply': 'Answered: {prompt}'}}); "
            "print(a.main_chat_id, create_api_token(user=u, name='t')[1])"
        )).split()
        port = free_port()
        with open(log_path, "wb") as log:
            process = subprocess.Popen([sys.executable, "manage.py", "runhub", "--port", str(port)], cwd=ROOT,
                                       env=env, stdout=log, stderr=subprocess.STDOUT)
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                           timeout=10)
        wait_until(lambda: _answers(api), timeout=60, what="runhub to serve")

        def turn_answered(prompt: str) -> bool:
            sent = api.post(f"/api/v1/chats/{chat_id}/messages/", json={"content": prompt})
            assert sent.status_code == 201, sent.text
            run_id = sent.json()["runs"][0]["id"]
            return wait_until(lambda: api.get(f"/api/v1/runs/{run_id}/").json()["status"] == "succeeded",
                              timeout=30, what=f"the turn {prompt!r}")

        assert turn_answered("before")
        redis.Redis.from_url(server.url()).lpush("celery", UNREADABLE)
        wait_until(lambda: "stopped on its own" in log_path.read_text(errors="replace"), timeout=30,
                   what="runhub to say its worker stopped")
        assert turn_answered("after")
        assert process.poll() is None
    finally:
        if process is not None:
            process.kill()
            process.wait(10)
        server.stop()


def _answers(api: httpx.Client) -> bool:
    try:
        return api.get("/api/v1/schema/").status_code == 200
    except httpx.HTTPError:
        return False


# --- `make run`: one command migrates, makes the first admin and serves ---------------------------
# Django starts once instead of three times; the hub sets its model clients up in the background.

RUN_COMMAND = ["runhub", "--migrate", "--ensure-admin"]  # what `make run` runs


def test_make_run_is_the_one_command():
    recipe = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    commands = [line for line in recipe.splitlines() if "manage.py" in line]
    assert len(commands) == 1 and commands[0].endswith("manage.py " + " ".join(RUN_COMMAND))


def start_hub(env, log_path: Path, port: int):
    """`make run`'s command, its output in log_path; returns once it serves the log-in page."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen([sys.executable, "manage.py", *RUN_COMMAND, "--port", str(port)], cwd=ROOT,
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: process.poll() is not None or _serves(port), timeout=120, what="the hub to serve")
    except AssertionError:
        process.kill()
        raise
    assert process.poll() is None, log_path.read_text()
    return process


def _serves(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/login/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stop_hub(process, log_path: Path) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        def output():
            process.wait(10)
            return log_path.read_text()

        abort_and_explain(process, output)


def abort_and_explain(process, read_output) -> None:
    """Fail with what a hub that did not stop within 20 s of Ctrl-C was doing: SIGABRT makes its
    fault handler print each thread's stack (PYTHONFAULTHANDLER, clean_env) before it dies."""
    masks = signal_masks(process.pid)
    process.send_signal(signal.SIGABRT)
    try:
        output = read_output()
    except subprocess.TimeoutExpired:
        process.kill()
        output = read_output()
    pytest.fail(f"runhub did not stop within 20 s of Ctrl-C; its threads' signal masks (hex):\n{masks}\n"
                f"its output and threads:\n{output[-6000:]}")


def signal_masks(pid: int) -> str:
    """Each thread's pending, blocked, ignored and caught signals, as /proc shows them: a SIGINT
    (bit 2) pending and blocked in every thread never reaches Python's handler."""
    lines = []
    for status in sorted(Path(f"/proc/{pid}/task").glob("*/status")):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        lines.append(" ".join(f"{key}={fields.get(key, '?').strip()}"
                              for key in ("Name", "ShdPnd", "SigPnd", "SigBlk", "SigIgn", "SigCgt")))
    return "\n".join(lines)


@pytest.mark.serial  # a fresh runhub must serve within start_hub's wait
def test_the_one_command_prepares_a_fresh_data_dir_prints_the_log_in_and_keeps_it(tmp_path):
    env = clean_env(tmp_path)
    port = free_port()
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    process = start_hub(env, first_log, port)
    try:
        output = first_log.read_text()
        assert "Preparing the database" in output
        password = re.search(r"password: (\S+)", output).group(1)
        log_in(f"http://127.0.0.1:{port}", "admin", password)
    finally:
        stop_hub(process, first_log)
    assert "Hub stopped." in first_log.read_text()

    process = start_hub(env, second_log, port)
    stop_hub(process, second_log)
    again = second_log.read_text()
    assert "Preparing the database" not in again  # nothing left to apply
    assert f"password: {password}" in again  # the same account, shown again
    assert "Traceback" not in first_log.read_text() + again


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:1/hub"}, "the database does not answer"),
        ({"REDIS_URL": "redis://127.0.0.1:1/0"}, "Redis at REDIS_URL does not answer"),
    ],
)
def test_a_bad_setting_stops_the_one_command_before_it_migrates(tmp_path, variables, expected):
    result = manage(*RUN_COMMAND, "--port", str(free_port()), env=clean_env(tmp_path, **variables))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Hub cannot start:") and expected in lines[0], result.stderr
    assert "Preparing the database" not in result.stdout


@pytest.mark.serial  # a fresh runhub must serve within start_hub's wait
def test_a_fresh_hub_answers_a_model_turn_sent_as_soon_as_it_serves(tmp_path):
    """The model clients are set up in the background while the hub serves; a turn sent at once
    still reaches the model server and settles with its answer."""
    from agents_app.fake_provider import FakeProvider

    with FakeProvider(text="Hello {prompt}") as fake:
        env = clean_env(tmp_path, OPENAI_BASE_URL=fake.openai_url, OPENAI_API_KEY="sk-test-startup")
        assert manage("migrate", "--noinput", "-v", "0", env=env, timeout=120).returncode == 0
        chat_id, token = shell(env, (
            "from django.contrib.auth.models import User; from agents_app.services import create_agent; "
            "from hub.services import create_api_token; u = User.objects.create_user('ann', password='x'); "
            "a = create_agent(owner=u, name='Model', model='openai:fake-model'); "
            "print(a.main_chat_id, create_api_token(user=u, name='t')[1])"
        )).split()
        port = free_port()
        log_path = tmp_path / "hub.log"
        process = start_hub(env, log_path, port)
        try:
            api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                               timeout=10)
            sent = api.post(f"/api/v1/chats/{chat_id}/messages/", json={"content": "Ada"})
            assert sent.status_code == 201, sent.text
            run_id = sent.json()["runs"][0]["id"]
            wait_until(lambda: api.get(f"/api/v1/runs/{run_id}/").json()["status"] == "succeeded", timeout=60,
                       what="the turn to succeed")
            messages = api.get(f"/api/v1/chats/{chat_id}/messages/").json()
        finally:
            stop_hub(process, log_path)
    assert [request.messages[-1]["content"] for request in fake.requests] == ["Ada"]
    assert "Hello Ada" in [message["content"] for message in messages["results"]]


@pytest.mark.django_db
def test_the_hub_sets_up_the_model_clients_its_agents_use(user, make_agent):
    from agents_app.apps import model_clients_of_agents
    from agents_app.remotes import create_remote
    from agents_app.services import delete_agent

    make_agent(user, name="Scripted")  # test:scripted needs no client
    assert model_clients_of_agents() == set()
    make_agent(user, name="Local", model="ollama:llama3.2")
    assert model_clients_of_agents() == {"openai"}  # Ollama talks through the OpenAI client
    gone = make_agent(user, name="Claude", model="anthropic:claude-sonnet-4-5")
    delete_agent(agent=gone)
    assert model_clients_of_agents() == {"openai"}
    make_agent(user, name="Claude again", model="anthropic:claude-sonnet-4-5")
    create_remote(owner=user, name="Tools", url="http://127.0.0.1:9/mcp")
    assert model_clients_of_agents() == {"openai", "anthropic", "mcp"}


MODEL_CLIENT_MODULES = ("pydantic_ai.models.openai", "pydantic_ai.models.anthropic", "pydantic_ai.mcp")


def printed_by_a_fresh_interpreter(code: str, **env) -> str:
    """What code prints in a new Python process on the hub's settings (env added to this one's)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "hub.settings", **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout


def clients_a_worker_loads_on_start(database_url: str) -> list[str]:
    """The model clients' modules a Celery worker process of its own has imported once its
    worker_init handlers ran, in a fresh interpreter on that database."""
    check = ("import sys, django; django.setup(); from hub import celery; "
             "celery.set_up_model_clients_before_taking_tasks(); "
             f"print(*[name for name in {MODEL_CLIENT_MODULES!r} if name in sys.modules])")
    return printed_by_a_fresh_interpreter(check, DATABASE_URL=database_url).split()


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_a_worker_sets_up_the_openai_client_and_those_its_agents_use_before_its_first_task(user, make_agent):
    from tests.chaos.cluster import test_database_url

    make_agent(user, name="Scripted")
    assert clients_a_worker_loads_on_start(test_database_url()) == ["pydantic_ai.models.openai"]
    make_agent(user, name="Claude", model="anthropic:claude-sonnet-4-5")
    assert clients_a_worker_loads_on_start(test_database_url()) == [
        "pydantic_ai.models.openai", "pydantic_ai.models.anthropic"]


def test_a_worker_that_cannot_read_its_agents_sets_up_every_model_client():
    nothing_listens = f"postgres://postgres@127.0.0.1:{free_port()}/hub"
    assert clients_a_worker_loads_on_start(nothing_listens) == list(MODEL_CLIENT_MODULES)


def test_setting_up_every_model_client_needs_no_network():
    from hub.celery import MODEL_CLIENTS, set_up_model_clients

    set_up_model_clients(MODEL_CLIENTS)  # builds one of each against an address nothing listens on
    assert {"pydantic_ai.models.openai", "pydantic_ai.models.anthropic", "pydantic_ai.mcp"} <= set(sys.modules)


def worker_command_defaults(**env) -> dict:
    """The worker command's options as `celery -A hub worker` reads them, with nothing on its
    command line: Celery's CLI loads the app (hub.celery) before it reads the worker's options."""
    check = ("import json, hub.celery; from celery.bin.celery import celery; from celery.bin.worker import worker; "
             "group = celery.make_context('celery', ['-A', 'hub', 'worker'], auto_envvar_prefix='CELERY', "
             "resilient_parsing=True); "
             "params = worker.make_context('worker', [], parent=group, resilient_parsing=True).params; "
             "print(json.dumps({name: params[name] for name in ('without_mingle', 'without_gossip')}))")
    return json.loads(printed_by_a_fresh_interpreter(check, **env))


def test_a_worker_started_as_the_docs_say_skips_mingle_and_gossip_unless_told_otherwise():
    """Mingle waits a second at each worker start for revoked task ids, which the hub never makes:
    a worker restarted after a crash would take turns that second later."""
    assert worker_command_defaults() == {"without_mingle": True, "without_gossip": True}
    assert worker_command_defaults(CELERY_WORKER_WITHOUT_MINGLE="false") == {
        "without_mingle": False, "without_gossip": True}


def test_daphne_leaves_an_upload_body_to_django():
    """Twisted would parse a multipart body on Daphne's one thread, stalling every stream."""
    from daphne.http_protocol import WebRequest
    from twisted.web.test.requesthelper import DummyChannel

    import hub.asgi  # noqa: F401  (its import turns the parsing off)

    channel = DummyChannel()
    channel.factory = type("Factory", (), {"server": type("Server", (), {"protocol_connected": lambda *a: None})()})()
    request = WebRequest(channel)
    assert request._parsePOSTFormSubmission is False


def test_django_starts_without_the_model_libraries_the_file_parsers_or_twisted():
    """Every worker, beat, Daphne and manage.py command sets Django up: those imports cost most of
    a second there and only runhub, a worker's tasks, the file reader or runserver need them.
    runserver is still Daphne's (pages and websockets), loaded when it runs."""
    check = ("import sys, django; django.setup(); "
             "print(*[name for name in ('pydantic_ai', 'pypdf', 'docx', 'openpyxl', 'twisted.internet.reactor') "
             "if name in sys.modules]); "
             "from django.core.management import get_commands, load_command_class; "
             "print(type(load_command_class(get_commands()['runserver'], 'runserver')).__module__)")
    imported, runserver = printed_by_a_fresh_interpreter(check).split("\n")[:2]
    assert imported == ""
    assert runserver == "daphne.management.commands.runserver"
