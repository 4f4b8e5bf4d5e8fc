"""Pages: opening a chat and the directory page, over HTTP, on the embedded hub `make run` starts.

A hub is started as `make run` starts it (`manage.py runhub --migrate --ensure-admin`: SQLite under
its own HUB_DATA_DIR, the in-memory channel layer, the in-process worker), on a free port, with
no DATABASE_URL or REDIS_URL. Before it starts, this process fills its database through the hub's
own services, in one transaction (not timed): one user with CHATS chats of MESSAGES messages
each, the user's and an agent's by turns, in a thread the first message starts (as the page's
composer does), the agent a member of every chat.

Then, with the user's logged-in session cookie on one keep-alive connection (as a browser keeps
one), it times to the full response:

* open_chat: GET /chats/<id>/ of a random chat. The page carries the chat, its threads and the
  newest page of its messages in its own HTML (json_script "hub-initial"), so this one request is
  all a browser waits for before it shows the messages (scripts and styles come from its cache);
  the benchmark checks that the chat's newest message is in it.
* switch_chat: GET /chats/<id>/state/, what the page fetches when a chat is picked in its
  directory without reloading.
* directory: GET / (the chat page with no chat open).

p50 and p95 over SAMPLES requests each (the three interleaved), after WARMUP of each. Target
(issue #24): opening a chat p50 <= 30 ms at 2,000 chats of 20 messages. `python_speed_ms`
(bench/cpu.py) is the cores' speed at the time.
"""

import contextlib
import os
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench import cpu
from bench.live_hub import BIN, ROOT, free_port, log, session_cookie, setup_django

CHATS = int(os.environ.get("BENCH_PAGES_CHATS", "2000"))
MESSAGES = int(os.environ.get("BENCH_PAGES_MESSAGES", "20"))
SAMPLES = int(os.environ.get("BENCH_PAGES_SAMPLES", "200"))
WARMUP = int(os.environ.get("BENCH_PAGES_WARMUP", "20"))
TARGET_OPEN_CHAT_P50_MS = 30
START_TIMEOUT_SECONDS = 120
STOP_TIMEOUT_SECONDS = 20
SEED = 20260424
WORDS = ("the plan for friday", "a short note on caching", "why the build failed", "numbers from the report",
         "what the customer asked", "how to reproduce it", "**bold** and `code`", "a list:\n- one\n- two")


def hub_env(data_dir: Path, port: int) -> dict:
    """Embedded mode as `make run` starts it on a laptop: no database or Redis from outside."""
    dropped = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    env = {name: value for name, value in os.environ.items() if name not in dropped and not name.startswith("HUB_")}
    env.update(HUB_DATA_DIR=str(data_dir), HOST="127.0.0.1", PORT=str(port), DEBUG="false", LOG_LEVEL="WARNING",
               SECRET_KEY="bench-only-not-a-secret-" + "x" * 32, PYTHONUNBUFFERED="1",
               DJANGO_SETTINGS_MODULE="hub.settings")
    return env


# --- The data, through the services -----------------------------------------------------------

def migrate_in_this_process(env: dict) -> None:
    """Set this process up as the embedded hub of env (SQLite in its data dir) and migrate it."""
    for name in ("DATABASE_URL", "REDIS_URL"):  # embedded: none of the shell's servers
        os.environ.pop(name, None)
    setup_django(env)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill(env: dict) -> tuple[str, list[str]]:
    """Migrate and fill the hub's database from this process; (session cookie, chat ids)."""
    from django.db import connections, transaction

    migrate_in_this_process(env)
    started = time.monotonic()
    with transaction.atomic():
        user, chat_ids = fill_chats()
    cookie = session_cookie(user)
    connections.close_all()  # the hub's process takes the file from here
    log(f"{CHATS:,} chats of {MESSAGES} messages stored in {time.monotonic() - started:.0f} s")
    return cookie, chat_ids


def fill_chats():
    from django.contrib.auth import get_user_model

    from agents_app.services import create_agent
    from chats import services

    rng = random.Random(SEED)
    user = get_user_model().objects.create_user("bench", password="bench-only")
    # An agent that never answers by itself: its replies are stored here, and the hub's worker
    # finds no queued turn to run while it is timed.
    agent = create_agent(owner=user, name="Helper", model="builtin:librarian", reply_policy="never")
    chat_ids = []
    for number in range(CHATS):
        chat = services.create_chat(owner=user, title=f"Chat {number}: {rng.choice(WORDS)}", agents=[agent])
        first = services.send_message(chat=chat, content=rng.choice(WORDS), new_thread_title="First thread")
        for index in range(1, MESSAGES):
            services.send_message(chat=chat, content=" ".join(rng.choices(WORDS, k=rng.randint(1, 12))),
                                  thread=first.thread, sender_agent=agent if index % 2 else None)
        chat_ids.append(str(chat.pk))
        if (number + 1) % 500 == 0:
            log(f"  {number + 1:,} chats")
    return user, chat_ids


# --- The hub --------------------------------------------------------------------------------

@contextlib.contextmanager
def running_hub(env: dict, log_path: Path):
    """`runhub --migrate --ensure-admin` in a process group of its own; Ctrl-C's signal after."""
    with open(log_path, "ab") as output:
        process = subprocess.Popen([str(BIN / "python"), "manage.py", "runhub", "--migrate", "--ensure-admin"],
                                   cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until_served(process, int(env["PORT"]))
            yield process
        finally:
            stop(process)


def wait_until_served(process: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"runhub exited with status {process.returncode} before serving")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/login/", timeout=5).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"runhub served no page within {START_TIMEOUT_SECONDS} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_SECONDS)


# --- Timing ---------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


def summary(durations: list[float]) -> dict:
    return {"p50_ms": round(percentile(durations, 50), 1), "p95_ms": round(percentile(durations, 95), 1),
            "samples": len(durations)}


def timed_get(client: httpx.Client, url: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = client.get(url)
    response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    return elapsed, response


def measure(client: httpx.Client, chat_ids: list[str]) -> dict:
    rng = random.Random(SEED + 1)
    durations = {"open_chat": [], "switch_chat": [], "directory": []}
    for round_number in range(WARMUP + SAMPLES):
        chat_id = rng.choice(chat_ids)
        page_ms, page = timed_get(client, f"/chats/{chat_id}/")
        if chat_id not in page.text or "hub-initial" not in page.text:
            raise RuntimeError(f"the page of chat {chat_id} does not carry the chat")
        state_ms, state = timed_get(client, f"/chats/{rng.choice(chat_ids)}/state/")
        if not state.json()["page"]["messages"]:
            raise RuntimeError("a chat opened empty")
        directory_ms, _ = timed_get(client, "/")
        if round_number >= WARMUP:
            for name, value in (("open_chat", page_ms), ("switch_chat", state_ms), ("directory", directory_ms)):
                durations[name].append(value)
    return {name: summary(values) for name, values in durations.items()}


def run() -> dict:
    began = time.monotonic()
    speed = cpu.python_speed_ms()
    log(f"a million Python additions take {speed} ms on this machine now")
    with tempfile.TemporaryDirectory(prefix="hub-bench-pages-") as tmp:
        workdir = Path(tmp)
        env = hub_env(workdir / "data", free_port())
        cookie, chat_ids = fill(env)
        with running_hub(env, workdir / "runhub.log"):
            log(f"hub serving on port {env['PORT']}; timing {SAMPLES} opens after {WARMUP} to warm up")
            with httpx.Client(base_url=f"http://127.0.0.1:{env['PORT']}", headers={"Cookie": cookie},
                              timeout=30) as client:
                figures = measure(client, chat_ids)
    p50 = figures["open_chat"]["p50_ms"]
    log(f"open a chat p50 {p50} ms, p95 {figures['open_chat']['p95_ms']} ms")
    return {
        "config": {"chats": CHATS, "messages_per_chat": MESSAGES, "samples": SAMPLES, "warmup": WARMUP},
        "python_speed_ms": speed,
        **figures,
        "target": {"open_chat_p50_ms": p50, "limit_p50_ms": TARGET_OPEN_CHAT_P50_MS,
                   "met": p50 <= TARGET_OPEN_CHAT_P50_MS},
        "elapsed_s": round(time.monotonic() - began, 1),
    }
