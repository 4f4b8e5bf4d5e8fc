"""Embedded: many conversations at once on the hub as `make run` starts it.

One `manage.py runhub` process, as `make run` starts it (SQLite, the in-memory channel layer, the
in-process worker with its default threads), on a data dir of its own. For each N in SIZES, N
users each open their chat's websocket and send one message at once; each chat's scripted agent
answers REPLY, a hundred words at 20 pieces a second (5 s), as the model server of the side-by-side
with Open WebUI did. Measured per round, through the path a browser uses:

* the first word: from each user's send to the reply's first delta in their tab (p50, p99, max);
* relay latency: from the model's piece (model_at) to the client, p50 and p99;
* streams complete (every reply whole in the tab and settled, no gap);
* CPU seconds of the hub's process per reply (its threads together, from /proc).

Targets, at N = 50: every conversation's first word within 1 s, relay p99 ≤ 100 ms, none lost.
CPU per reply is reported beside Open WebUI's figures of the same side-by-side (OPEN_WEBUI_CPU_S).
"""

import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import cpu, live_hub, streaming
from bench.live_hub import BIN, ROOT, log

SIZES = tuple(int(n) for n in os.environ.get("BENCH_EMBEDDED_SIZES", "1,10,50").split(","))
ROUNDS = int(os.environ.get("BENCH_EMBEDDED_ROUNDS", "3"))
REPLY = " ".join(f"word{i:03d}" for i in range(100))  # 799 characters
CHUNK = 8  # a word and its space: 100 pieces
DELAY = 0.05  # 20 pieces a second
TARGET_SIZE = 50
FIRST_WORD_LIMIT_S = 1.0
RELAY_P99_LIMIT_MS = 100
# Open WebUI 0.12.4 on this machine against the same model server, CPU seconds per reply at
# N = 1, 10 and 50 (issue #24's side-by-side); `python -m bench peers` measures both anew.
OPEN_WEBUI_CPU_S = {"1": 0.47, "10": 0.39, "50": 0.49}
START_TIMEOUT_SECONDS = 120


def hub_env(data_dir: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "HUB_")) and k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({
        "DJANGO_SETTINGS_MODULE": live_hub.SETTINGS_MODULE,
        "SECRET_KEY": "bench-only-not-a-secret-" + "x" * 32,  # the bench signs the hub's sessions
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "HUB_DATA_DIR": str(data_dir),
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    })
    env.update({key.removeprefix("BENCH_"): value for key, value in os.environ.items() if key.startswith("BENCH_HUB_")})
    return env


@contextlib.contextmanager
def embedded_hub():
    """runhub --migrate on a fresh data dir and a free port, as `make run` starts it; stopped on exit."""
    home = Path(tempfile.mkdtemp(prefix="hub-bench-embedded-"))
    port = live_hub.free_port()
    hub = live_hub.Hub(env=hub_env(home / "data", port), port=port, dsn="", log_dir=home)
    output = open(home / "runhub.log", "w")
    process = subprocess.Popen([str(BIN / "python"), "manage.py", "runhub", "--migrate", "--port", str(port)],
                               cwd=ROOT, env=hub.env, stdout=output, stderr=subprocess.STDOUT)
    hub.processes["runhub"] = (process, output)
    try:
        wait_until_served(hub)
        yield hub
    except BaseException:
        live_hub.stop_all(hub)
        live_hub.show_logs(hub)
        raise
    live_hub.stop_all(hub)
    shutil.rmtree(home, ignore_errors=True)


def wait_until_served(hub) -> None:
    import httpx

    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        live_hub.check_alive(hub)
        try:
            if httpx.get(f"{hub.base}/login/", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("runhub did not serve the log-in page in time")


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system, all threads) the process used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_round(hub, streams: list[dict]) -> dict:
    pid = hub.processes["runhub"][0].pid
    before = process_cpu_seconds(pid)
    with streaming.no_client_collections():
        watches = asyncio.run(streaming.stream_round(hub.port, streams))
    time.sleep(0.5)  # the last settles
    used = process_cpu_seconds(pid) - before
    figures = streaming.stream_figures(watches, reply=REPLY, chunk=CHUNK)
    figures["cpu_s_per_reply"] = round(used / len(streams), 3)
    return figures


def summary(rounds: list[dict]) -> dict:
    keys = ("streams_complete", "gaps", "latency_p50_ms", "latency_p99_ms", "first_word_p50_s",
            "first_word_p99_s", "first_word_max_s", "cpu_s_per_reply", "model_pieces_per_second_per_stream",
            *(f"first_word_{leg}_{p}_s" for leg in streaming.FIRST_WORD_LEGS for p in ("p50", "p99")))
    result = {key: statistics.median(r[key] for r in rounds if r[key] is not None) for key in keys
              if any(r[key] is not None for r in rounds)}
    result["streams_complete_each_round"] = [r["streams_complete"] for r in rounds]
    result["latency_p99_ms_each_round"] = [r["latency_p99_ms"] for r in rounds]
    result["first_word_max_s_each_round"] = [r["first_word_max_s"] for r in rounds]
    return result


def target_check(by_size: dict) -> dict:
    figures = by_size.get(str(TARGET_SIZE))
    if figures is None:
        return {"checked": False, "why": f"N = {TARGET_SIZE} was not run"}
    first_word = max(figures["first_word_max_s_each_round"])
    relay = figures["latency_p99_ms"]
    all_complete = all(count == TARGET_SIZE for count in figures["streams_complete_each_round"])
    return {
        "n": TARGET_SIZE,
        "first_word_max_s": first_word, "first_word_limit_s": FIRST_WORD_LIMIT_S,
        "relay_p99_ms": relay, "relay_p99_limit_ms": RELAY_P99_LIMIT_MS,
        "none_lost": all_complete,
        "met": first_word <= FIRST_WORD_LIMIT_S and relay <= RELAY_P99_LIMIT_MS and all_complete,
        "cpu_s_per_reply": {n: f["cpu_s_per_reply"] for n, f in by_size.items()},
        "open_webui_cpu_s_per_reply": OPEN_WEBUI_CPU_S,
        "cpu_at_or_below_open_webui": {n: f["cpu_s_per_reply"] <= OPEN_WEBUI_CPU_S[n]
                                       for n, f in by_size.items() if n in OPEN_WEBUI_CPU_S},
    }


def run() -> dict:
    began = time.monotonic()
    speed = cpu.python_speed_ms()
    log(f"a million Python additions take {speed} ms on this machine now")
    with embedded_hub() as hub:
        live_hub.setup_django(hub.env)
        streams = streaming.make_streams(max(SIZES), settings=streaming.scripted(REPLY, chunk=CHUNK, delay=DELAY))
        live_hub.close_django_connections()  # SQLite: the bench holds no connection while the hub writes
        log(f"made {len(streams)} users, agents and chats; warming up")
        asyncio.run(streaming.stream_round(hub.port, streams[:2]))
        by_size = {}
        for size in SIZES:
            rounds = []
            for index in range(ROUNDS):
                log(f"N={size} round {index + 1}/{ROUNDS}")
                rounds.append(measure_round(hub, streams[:size]))
            by_size[str(size)] = summary(rounds)
    return {
        "config": {"sizes": list(SIZES), "rounds": ROUNDS, "reply_chars": len(REPLY), "chunk": CHUNK,
                   "delay_s": DELAY, "hub_settings": {k: v for k, v in hub.env.items() if k.startswith("HUB_")
                                                       and k != "HUB_DATA_DIR"}},
        "python_speed_ms": speed,
        "by_n": by_size,
        "target": target_check(by_size),
        "elapsed_s": round(time.monotonic() - began, 1),
    }
