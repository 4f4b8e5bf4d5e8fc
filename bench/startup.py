"""Start-up: how long `make run` takes to serve its first page, and a fresh hub's first model call.

Everything runs as a person runs it: `make run` in the repository (embedded mode: SQLite, the
in-process worker), on a warm venv (the benchmark refuses to run when `make run` would install
anything first). Measured:

* first page: from starting `make run` to the first 200 of the log-in page, wall clock; RUNS
  starts with a fresh HUB_DATA_DIR each (the first run: every migration, the admin account), and
  RUNS starts on an existing data dir (every later run);
* first model call: a hub started afresh on a prepared data dir (a user, an agent on the
  OpenAI-compatible fake model server of agents_app.fake_provider, an API token); once it serves
  its first page, the benchmark sends a message through the API and times the send → the fake
  server receiving the model request. Once sent at once, once after PAUSE_SECONDS (a person
  logging in and typing), a fresh hub for each.

Targets: first page ≤ 5 s (on an existing data dir, a second `make run`); first model call
≤ 0.5 s. Figures are medians; `python_speed_ms` (bench/cpu.py) is the cores' speed that day and
`machine_busy_before` how busy the whole machine was just before the benchmark started (a
quiet machine: near 0).
"""

import contextlib
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench import cpu
from bench.live_hub import ROOT, free_port, log

RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "5"))
PAUSE_SECONDS = float(os.environ.get("BENCH_STARTUP_PAUSE_S", "3"))
TARGET_FIRST_PAGE_S = 5.0
TARGET_FIRST_MODEL_CALL_S = 0.5
START_TIMEOUT_SECONDS = 300
STOP_TIMEOUT_SECONDS = 20
MODEL = "openai:fake-model"
PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                      "OLLAMA_API_KEY", "OLLAMA_BASE_URL")


def hub_env(data_dir: Path, port: int, **extra) -> dict:
    """Embedded mode, as `make run` starts on a laptop: no database or Redis, no provider set."""
    dropped = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "MAKEFLAGS", "MFLAGS", *PROVIDER_VARIABLES}
    env = {name: value for name, value in os.environ.items() if name not in dropped}
    env.update(HUB_DATA_DIR=str(data_dir), HOST="127.0.0.1", PORT=str(port), PYTHONUNBUFFERED="1", **extra)
    return env


def check_venv_is_warm() -> None:
    """`make run` on a venv that is not installed yet would time pip, not the hub."""
    if subprocess.run(["make", "-q", ".venv/.installed"], cwd=ROOT).returncode != 0:
        raise SystemExit("the venv is not installed or out of date: run `make run` once first")


@contextlib.contextmanager
def make_run(env: dict, log_path: Path):
    """`make run` in a process group of its own, stopped with Ctrl-C's signal (then killed) after."""
    with open(log_path, "ab") as output:
        process = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=ROOT, env=env, stdout=output,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield process
        finally:
            stop_group(process)


def stop_group(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_SECONDS)


def wait_for_first_page(process: subprocess.Popen, port: int, began: float) -> float:
    """Seconds from `began` until the log-in page answers 200."""
    url = f"http://127.0.0.1:{port}/login/"
    while time.monotonic() - began < START_TIMEOUT_SECONDS:
        if process.poll() is not None:
            raise RuntimeError(f"make run exited with status {process.returncode} before serving")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return time.monotonic() - began
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"make run served no page within {START_TIMEOUT_SECONDS} s")


def time_first_page(data_dir: Path, log_path: Path) -> float:
    port = free_port()
    began = time.monotonic()
    with make_run(hub_env(data_dir, port), log_path) as process:
        return wait_for_first_page(process, port, began)


def first_page_runs(workdir: Path) -> dict:
    fresh, existing = [], []
    shared = workdir / "existing"
    time_first_page(shared, workdir / "warm-up.log")  # compiles changed code and makes the data dir
    for index in range(RUNS):
        fresh.append(time_first_page(workdir / f"fresh{index}", workdir / f"fresh{index}.log"))
        existing.append(time_first_page(shared, workdir / f"existing{index}.log"))
        log(f"first page {index + 1}/{RUNS}: fresh data dir {fresh[-1]:.2f} s, existing {existing[-1]:.2f} s")
    return {"fresh_data_dir": summary(fresh), "existing_data_dir": summary(existing)}


def summary(samples: list[float]) -> dict:
    return {"median_s": round(statistics.median(samples), 2), "runs_s": [round(s, 2) for s in samples]}


# --- first model call ----------------------------------------------------------------------

PREPARE = (
    "from django.contrib.auth.models import User; from agents_app.services import create_agent; "
    "from hub.services import create_api_token; u = User.objects.create_user('bench', password='x'); "
    f"a = create_agent(owner=u, name='Fake', model={MODEL!r}); "
    "print(a.main_chat_id, create_api_token(user=u, name='bench')[1])"
)


def prepare_data_dir(env: dict) -> tuple[str, str]:
    """(chat id, API token) of a user whose agent talks to the fake model server."""
    python = str(ROOT / ".venv" / "bin" / "python")
    for argv in (["migrate", "--noinput", "-v", "0"], ["shell", "-c", PREPARE]):
        result = subprocess.run([python, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=START_TIMEOUT_SECONDS)
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {argv[0]} failed: {result.stderr[-2000:]}")
    chat_id, token = result.stdout.split()[-2:]
    return chat_id, token


def wait_for_model_request(fake, count: int, sent: float) -> float:
    """Seconds from `sent` until the fake server holds `count` requests (polled every 2 ms)."""
    while len(fake.requests) < count:
        if time.monotonic() - sent > START_TIMEOUT_SECONDS:
            raise RuntimeError("the model server received no request")
        time.sleep(0.002)
    return time.monotonic() - sent


def wait_for_run(api: httpx.Client, run_id: str) -> None:
    """The turn ends before the hub stops, so the next start has nothing to recover."""
    deadline = time.monotonic() + 60
    while api.get(f"/api/v1/runs/{run_id}/").json()["status"] not in {"succeeded", "failed", "cancelled"}:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the turn {run_id} did not end")
        time.sleep(0.05)


def time_first_model_call(fake, data_dir: Path, chat_id: str, token: str, pause: float, log_path: Path) -> float:
    port = free_port()
    env = hub_env(data_dir, port, OPENAI_BASE_URL=fake.openai_url, OPENAI_API_KEY="sk-bench")
    before = len(fake.requests)
    began = time.monotonic()
    with make_run(env, log_path) as process:
        wait_for_first_page(process, port, began)
        time.sleep(pause)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as api:
            sent = time.monotonic()
            response = api.post(f"/api/v1/chats/{chat_id}/messages/", json={"content": "hello"})
            if response.status_code != 201:
                raise RuntimeError(f"sending failed: {response.status_code} {response.text[:500]}")
            seconds = wait_for_model_request(fake, before + 1, sent)
            wait_for_run(api, response.json()["runs"][0]["id"])
    return seconds


def first_model_call_runs(workdir: Path) -> dict:
    from agents_app.fake_provider import FakeProvider

    with FakeProvider(text="Hello {prompt}") as fake:
        data_dir = workdir / "model-call"
        env = hub_env(data_dir, 0, OPENAI_BASE_URL=fake.openai_url, OPENAI_API_KEY="sk-bench")
        chat_id, token = prepare_data_dir(env)
        time_first_model_call(fake, data_dir, chat_id, token, 0, workdir / "model-warm-up.log")
        at_once, after_pause = [], []
        for index in range(RUNS):
            at_once.append(time_first_model_call(fake, data_dir, chat_id, token, 0, workdir / f"model{index}.log"))
            after_pause.append(time_first_model_call(fake, data_dir, chat_id, token, PAUSE_SECONDS,
                                                     workdir / f"model-pause{index}.log"))
            log(f"first model call {index + 1}/{RUNS}: sent at the first page {at_once[-1]:.2f} s, "
                f"{PAUSE_SECONDS:g} s later {after_pause[-1]:.2f} s")
    return {"sent_at_first_page": summary(at_once), f"sent_{PAUSE_SECONDS:g}_s_after_first_page": summary(after_pause)}


def against(median_s: float, limit_s: float) -> dict:
    return {"median_s": median_s, "limit_s": limit_s, "met": median_s <= limit_s}


def target_check(first_page: dict, model_call: dict) -> dict:
    """The page targets are for a warm venv; the second `make run` (an existing data dir) is the one
    a person waits for every day, the fresh data dir is held to the same limit."""
    return {
        "first_page_existing_data_dir": against(first_page["existing_data_dir"]["median_s"], TARGET_FIRST_PAGE_S),
        "first_page_fresh_data_dir": against(first_page["fresh_data_dir"]["median_s"], TARGET_FIRST_PAGE_S),
        "first_model_call": against(model_call["sent_at_first_page"]["median_s"], TARGET_FIRST_MODEL_CALL_S),
    }


def machine_busy_now(seconds: float = 2.0) -> float | None:
    """How busy the machine is before the benchmark starts anything: near 0 on a quiet machine."""
    start = cpu.snapshot()
    time.sleep(seconds)
    used = cpu.cores_used(start, cpu.snapshot())
    return used["machine_busy"] if used else None


def run() -> dict:
    began = time.monotonic()
    check_venv_is_warm()
    busy = machine_busy_now()
    speed = cpu.python_speed_ms()  # before anything runs: the cores' own speed today
    log(f"a million Python additions take {speed} ms on this machine now; the machine was {busy} busy")
    with tempfile.TemporaryDirectory(prefix="hub-bench-startup-") as tmp:
        workdir = Path(tmp)
        first_page = first_page_runs(workdir)
        model_call = first_model_call_runs(workdir)
    return {
        "config": {"runs": RUNS, "pause_s": PAUSE_SECONDS, "model": MODEL},
        "python_speed_ms": speed,
        "machine_busy_before": busy,
        "first_page": first_page,
        "first_model_call": model_call,
        "target": target_check(first_page, model_call),
        "elapsed_s": round(time.monotonic() - began, 1),
    }
