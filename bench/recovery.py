"""Recovery: a worker SIGKILLed mid-reply, timed from the kill to what the user sees again.

The production layout on one machine: Daphne, two Celery workers (threads pool) and beat, on a
private PostgreSQL and Redis, as in the streaming benchmark (bench.live_hub). Each round, STREAMS
users each open their chat's websocket and ask their scripted agent for a reply of a few seconds;
once every reply is streaming, the worker running the most of them is SIGKILLed. For each reply
it was running, measured:

* kill → run recovered: the moment the killed run is marked recovered (its continuation queued),
  from the database;
* kill → first continued delta at the client: the first message.delta of the continuation run
  that reaches the tab, on this machine's clock;
* whether the reply the tab ends with is the scripted reply exactly (nothing lost, nothing
  repeated).

After each round the killed worker is started again, as a process manager would, and the round
waits until it answers a ping. Then the same with a single worker ("no survivor"): killed, and
started again at once, so what the user waits for is the worker's start.

Targets (while a worker survives): p50 ≤ 2 s and p95 ≤ 5 s from the kill to the first continued
delta at the client.
"""

import asyncio
import contextlib
import json
import os
import signal
import statistics
import time

from bench import live_hub
from bench.live_hub import BIN, log
from bench.streaming import open_socket, percentile

ROUNDS = int(os.environ.get("BENCH_RECOVERY_ROUNDS", "8"))
SOLO_ROUNDS = int(os.environ.get("BENCH_RECOVERY_SOLO_ROUNDS", "3"))
STREAMS = int(os.environ.get("BENCH_RECOVERY_STREAMS", "4"))
WORKERS = 2
CONCURRENCY = 8
CHUNK = 4
DELAY = 0.03  # seconds between pieces
REPLY = " ".join(f"piece{i:03d}" for i in range(120))  # 959 characters: 240 pieces, about 7 s
KILL_AFTER_SECONDS = 2.0  # into the replies, once every one is streaming
ROUND_TIMEOUT_SECONDS = 90
TARGET_P50_S = 2.0
TARGET_P95_S = 5.0
DATABASE = "hub_bench_recovery"


# --- The hub's processes ------------------------------------------------------------------

def worker_argv(index: int) -> list[str]:
    return [str(BIN / "celery"), "-A", "hub", "worker", "--pool", "threads", "--concurrency", str(CONCURRENCY),
            "--loglevel", "WARNING", "-n", f"recovery{index}@%h"]


def start_worker(hub, index: int) -> int:
    name = f"worker{index}"
    if name in hub.processes:
        hub.processes[name][1].close()  # the log of the process that was killed
    live_hub.spawn(hub, name, worker_argv(index))
    return hub.processes[name][0].pid


def start_beat(hub) -> None:
    live_hub.spawn(hub, "beat", [str(BIN / "celery"), "-A", "hub", "beat", "--loglevel", "WARNING",
                                 "--scheduler", "celery.beat:Scheduler",
                                 "--schedule", str(hub.log_dir / "beat-schedule")])


def worker_pids(hub) -> dict[int, str]:
    return {process.pid: name for name, (process, _) in hub.processes.items() if name.startswith("worker")}


def wait_for_ping(hub, count: int) -> float:
    """Seconds until `count` workers answer a ping."""
    began = time.monotonic()
    live_hub.wait_for_workers(hub, count)
    return time.monotonic() - began


# --- Users, chats and what they see ---------------------------------------------------------

def make_streams(count: int) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from agents_app.services import create_agent

    streams = []
    with transaction.atomic():
        for index in range(count):
            user = get_user_model().objects.create_user(f"recovery{index:02d}", password=None)
            agent = create_agent(owner=user, name="Streamer", model="test:scripted",
                                 settings={"script": {"reply": REPLY, "chunk": CHUNK, "delay": DELAY}})
            streams.append({"chat_id": str(agent.main_chat_id), "cookie": live_hub.session_cookie(user)})
    return streams


class Tab:
    """One chat's websocket: the reply's text as the tab holds it, and when each run's first
    delta arrived."""

    def __init__(self, socket):
        self.socket = socket
        self.text = ""
        self.final = None
        self.first_delta_of_run: dict[str, float] = {}
        self.repeats = 0

    def note(self, event: dict, received: float) -> None:
        if event.get("type") == "message.delta" and event.get("part") == "text":
            self.first_delta_of_run.setdefault(event["run_id"], received)
            if event["offset"] < len(self.text) and not self.text.startswith(event["text"], event["offset"]):
                self.repeats += 1
            self.text = self.text[: event["offset"]] + event["text"]
        elif event.get("type") == "message.settled" and event["message"]["sender"]["type"] == "agent":
            # An interrupted reply is settled too, until its continuation streams on into it.
            self.text = event["message"]["content"]
            if event["message"]["status"] == "final":
                self.final = self.text

    async def follow(self, deadline: float) -> None:
        while self.final is None and time.monotonic() < deadline:
            try:
                raw = await asyncio.wait_for(self.socket.recv(), deadline - time.monotonic())
            except TimeoutError:
                return
            self.note(json.loads(raw), time.time())


def running_runs(dsn: str) -> list[tuple[str, int]]:
    """(run id, pid of the process running it) of every running run."""
    from bench.streaming import sql

    rows = sql(dsn, "SELECT id::text, lease_owner FROM agents_app_run WHERE status = 'running'")
    return [(run_id, int(owner.split(":")[1])) for run_id, owner in rows if owner.count(":") == 2]


def recovered_at(dsn: str, run_ids: list[str]) -> dict[str, float]:
    from bench.streaming import sql

    rows = sql(dsn, "SELECT id::text, extract(epoch FROM finished_at) FROM agents_app_run "
                    "WHERE id = ANY(%s::uuid[]) AND status = 'recovered'", (run_ids,))
    return {run_id: float(at) for run_id, at in rows}


async def one_round(hub, streams: list[dict], *, restart_at_once: bool) -> dict:
    """Start every reply, kill the worker running the most of them, follow every reply to its end."""
    tabs = [Tab(await open_socket(hub.port, stream)) for stream in streams]
    deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS
    following = [asyncio.create_task(tab.follow(deadline)) for tab in tabs]
    try:
        for tab in tabs:
            await tab.socket.send(json.dumps({"type": "message.send", "content": "a long answer, please"}))
        await asyncio.sleep(KILL_AFTER_SECONDS)
        runs = running_runs(hub.dsn)
        pids = worker_pids(hub)
        owners = [pid for _, pid in runs if pid in pids]
        if not owners:
            raise RuntimeError("no reply was running on a worker when the kill was due")
        victim = statistics.mode(owners)
        victim_runs = [run_id for run_id, pid in runs if pid == victim]
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        index = int(pids[victim].removeprefix("worker"))
        hub.processes[pids[victim]][0].wait(10)
        if restart_at_once:
            start_worker(hub, index)
        await asyncio.gather(*following)
    finally:
        await asyncio.gather(*(tab.socket.close() for tab in tabs), return_exceptions=True)
    recovered = recovered_at(hub.dsn, victim_runs)
    samples = []
    for run_id in victim_runs:
        tab = next((t for t in tabs if run_id in t.first_delta_of_run), None)
        continued = [at for run, at in (tab.first_delta_of_run.items() if tab else []) if run != run_id]
        samples.append({
            "recovered_s": round(recovered[run_id] - killed_at, 3) if run_id in recovered else None,
            "first_continued_delta_s": round(min(continued) - killed_at, 3) if continued else None,
        })
    if not restart_at_once:
        start_worker(hub, index)
    return {"samples": samples, "replies": len(tabs), "exact": sum(t.final == REPLY and t.text == REPLY for t in tabs),
            "repeats": sum(t.repeats for t in tabs)}


def quantiles(values: list) -> dict:
    present = [v for v in values if v is not None]
    return {"p50_s": percentile(present, 50), "p95_s": percentile(present, 95),
            "max_s": max(present) if present else None, "samples": len(present), "missing": len(values) - len(present)}


def scenario(hub, streams: list[dict], *, rounds: int, workers: int, restart_at_once: bool) -> dict:
    samples, replies, exact, repeats, restarts = [], 0, 0, 0, []
    for number in range(1, rounds + 1):
        result = asyncio.run(one_round(hub, streams, restart_at_once=restart_at_once))
        samples += result["samples"]
        replies, exact, repeats = replies + result["replies"], exact + result["exact"], repeats + result["repeats"]
        restarts.append(round(wait_for_ping(hub, workers), 2))
        log(f"round {number}/{rounds}: {result['samples']}, {result['exact']}/{result['replies']} exact")
    return {
        "kill_to_recovered": quantiles([s["recovered_s"] for s in samples]),
        "kill_to_first_continued_delta": quantiles([s["first_continued_delta_s"] for s in samples]),
        "replies": replies, "replies_exact": exact, "repeated_deltas": repeats,
        "worker_restart_to_ping_s_median": statistics.median(restarts) if restarts else None,
    }


@contextlib.contextmanager
def hub_with_beat(workers: int):
    with live_hub.running_hub(database=DATABASE, workers=0, concurrency=CONCURRENCY) as hub:
        for index in range(workers):
            start_worker(hub, index)
        start_beat(hub)
        yield hub


def run() -> dict:
    began = time.monotonic()
    figures = {"config": {"rounds": ROUNDS, "solo_rounds": SOLO_ROUNDS, "streams": STREAMS, "workers": WORKERS,
                          "threads_per_worker": CONCURRENCY, "reply_chars": len(REPLY), "delay_s": DELAY,
                          "kill_after_s": KILL_AFTER_SECONDS}}
    with hub_with_beat(WORKERS) as hub:
        live_hub.setup_django(hub.env)
        figures["config"]["hub_settings"] = {k: v for k, v in hub.env.items() if k.startswith("HUB_")}
        streams = make_streams(STREAMS)
        live_hub.close_django_connections()
        wait_for_ping(hub, WORKERS)
        log(f"{ROUNDS} rounds: kill one of {WORKERS} workers mid-reply")
        figures["a_worker_survives"] = scenario(hub, streams, rounds=ROUNDS, workers=WORKERS, restart_at_once=False)
        # The second worker stops: from here on the killed worker is the only one.
        process, output = hub.processes.pop("worker1")
        process.terminate()
        process.wait(30)
        output.close()
        log(f"{SOLO_ROUNDS} rounds: kill the only worker mid-reply, started again at once")
        figures["no_worker_survives"] = scenario(hub, streams, rounds=SOLO_ROUNDS, workers=1, restart_at_once=True)
        live_hub.close_django_connections()
    survives = figures["a_worker_survives"]["kill_to_first_continued_delta"]
    figures["target"] = {
        "p50_s": survives["p50_s"], "p95_s": survives["p95_s"], "limit_p50_s": TARGET_P50_S,
        "limit_p95_s": TARGET_P95_S,
        "met": survives["p50_s"] is not None and survives["p50_s"] <= TARGET_P50_S
        and survives["p95_s"] <= TARGET_P95_S and survives["missing"] == 0,
    }
    figures["elapsed_s"] = round(time.monotonic() - began, 1)
    return figures
