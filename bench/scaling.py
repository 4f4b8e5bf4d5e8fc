"""Scaling: how many deltas a second the live path carries within its latency bound, what each
process spends per delta, and how many bytes Redis sends per delta, for 1 and 2 web processes
(Daphne) and 1, 2 and 3 worker processes.

Each layout runs on the same hub (its own PostgreSQL database and Redis DB 9, bench.live_hub):
its Daphne and Celery processes are started afresh, each user's tab opens on one web process,
alternating, as a balancer spreads them, and the load steps through LEVELS concurrent streams.
A stream is the streaming benchmark's (bench.streaming): a scripted reply of 400 pieces paced at
50 a second, timed from the model's piece to the websocket client. Per level:

* delta events delivered to the tabs per second, latency p50 and p99, and the Redis floor's p99
  measured at the same time (a bare publish → subscribe in another process, as the streaming
  benchmark's floor); the level is within bound when p99 ≤ that floor's p99 + 50 ms. Per layout,
  the most deltas a second within bound.
* CPU milliseconds per 1,000 deltas for each Daphne process, each worker, PostgreSQL (the private
  cluster's postmaster and its backends), Redis and the benchmark's client, read from /proc by
  pid. These are taken while every stream of the level was streaming (samples every
  SAMPLE_INTERVAL seconds; the round's start and end, where turns start and settle, are left out:
  the streaming benchmark's turn_cost measures those), so they are what a delta costs. Two cores
  cap the absolute rates; per-process costs let the rate on more cores be computed:
  deltas_per_core_second is how many deltas one core-second of the whole hub carries.
* Redis bytes sent per delta: what each hub process's connections to Redis received (the kernel's
  count per TCP socket, `ss -ti`; this Redis 7.0's CLIENT LIST has no byte counters), and of that
  what the web processes' delta subscriptions received (the connections CLIENT LIST names
  hub-delta-feed). The Redis server is shared with other work on this machine: its own
  total_net_output_bytes is reported too, less the rate measured while the hub idled just before
  the level, as a rough cross-check (other work's bursts make it noisy). Redis's CPU is the
  server's, less its idle rate measured the same way: as noisy.

Each web process hears only the deltas of the chats it has tabs for (chats.deltafeed), so with
the tabs spread over two web processes the bytes per delta should stay as with one; before, every
web process heard every delta, and two would have doubled them. `redis_bytes_per_delta_by_webs`
shows the two side by side.

About twelve minutes. BENCH_SCALING_QUICK=1 runs two levels and two worker counts (about five
minutes); BENCH_SCALING_LEVELS, BENCH_SCALING_WEBS, BENCH_SCALING_WORKERS and
BENCH_SCALING_ROUNDS choose others.
"""

import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import threading
import time
from urllib.parse import urlsplit

from bench import cpu, live_hub, streaming
from bench.live_hub import log

QUICK = os.environ.get("BENCH_SCALING_QUICK") == "1"


def numbers(name: str, default: str) -> tuple[int, ...]:
    return tuple(int(n) for n in os.environ.get(name, default).split(","))


# Concurrent streams per level: 50 pieces a second each, so 100 streams ask for 5,000 deltas a second,
# more than this 2-core machine carries within the bound (the streaming benchmark: about 3,800).
LEVELS = numbers("BENCH_SCALING_LEVELS", "10,50" if QUICK else "10,25,50,100")
WEBS = numbers("BENCH_SCALING_WEBS", "1,2")
WORKER_COUNTS = numbers("BENCH_SCALING_WORKERS", "1,2" if QUICK else "1,2,3")
ROUNDS = int(os.environ.get("BENCH_SCALING_ROUNDS", "1"))
DATABASE = "hub_bench_scaling"
TARGET_MS = streaming.TARGET_MS  # p99 within this of the Redis floor's p99
SAMPLE_INTERVAL = 0.5  # seconds between CPU and byte samples
BACKGROUND_SECONDS = 2.0  # the shared Redis server's own rates, measured before each level
MIN_WINDOW_S = 1.5  # a shorter all-streaming window is too few ticks: the whole round is used then
# Bytes per delta with two web processes at most this many times those with one counts as flat:
# when every web process heard every delta, two heard twice the bytes (a ratio of 2).
FLAT_RATIO_LIMIT = 1.2
FEED_CLIENT_NAME = "hub-delta-feed"  # chats.deltafeed.CLIENT_NAME (the bench does not import chats)


# --- The processes of one layout ---------------------------------------------------------------

def start_layout(hub, *, webs: int, workers: int, concurrency: int) -> list[int]:
    """Stop whatever the hub ran, then start `webs` Daphne processes and `workers` workers; the
    web processes' ports. Redis DB 9 is emptied between layouts, so no chat stays registered for
    a web process that was stopped (Redis would go on routing its deltas to nobody for a minute)."""
    live_hub.stop_all(hub)
    hub.processes.clear()
    live_hub.flush_redis()
    ports = [hub.port] + [live_hub.free_port() for _ in range(webs - 1)]
    for index, port in enumerate(ports):
        live_hub.start_daphne(hub, name=f"daphne{index}", port=port)
    live_hub.start_workers(hub, workers=workers, concurrency=concurrency)
    for port in ports:
        live_hub.wait_until_served(hub, port)
    live_hub.wait_for_workers(hub, workers)
    return ports


def spread_tabs(streams: list[dict], ports: list[int]) -> list[dict]:
    """Each user's tab on one web process, alternating, as a balancer would spread them."""
    return [{**stream, "port": ports[index % len(ports)]} for index, stream in enumerate(streams)]


def pids_by_process(hub) -> dict[str, int]:
    return {name: process.pid for name, (process, _) in hub.processes.items()}


def postmaster_pid(dsn: str) -> int | None:
    """The private cluster's postmaster (its command line names the cluster's port); None for a
    server given in BENCH_POSTGRES, whose CPU other work may share."""
    if os.environ.get("BENCH_POSTGRES"):
        return None
    port = str(urlsplit(dsn).port)
    for entry in cpu.PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            argv = (entry / "cmdline").read_text().split("\0")
        except OSError:
            continue
        if "-p" in argv and argv[argv.index("-p") + 1:argv.index("-p") + 2] == [port]:
            return int(entry.name)
    return None


# --- Samples: CPU ticks by pid, and bytes Redis sent ---------------------------------------------

def redis_port() -> int:
    return urlsplit(live_hub.REDIS_URL).port or 6379


def bytes_from_redis() -> dict[int, tuple[int, int]]:
    """For every TCP connection to Redis on this machine: its local port → (the owning pid, the
    bytes it has received from Redis), as the kernel counts them."""
    output = subprocess.run(["ss", "-tinpH", "state", "established", f"( dport = :{redis_port()} )"],
                            capture_output=True, text=True, timeout=10).stdout
    connections, current = {}, None
    for line in output.splitlines():
        if not line[:1].isspace():  # the socket's line, then an indented line of its TCP figures
            pid = re.search(r"pid=(\d+)", line)
            local = line.split()[2]
            current = (int(local.rsplit(":", 1)[1]), int(pid.group(1)) if pid else None)
        elif current is not None:
            received = re.search(r"bytes_received:(\d+)", line)
            connections[current[0]] = (current[1], int(received.group(1)) if received else 0)
            current = None
    return connections


def delta_feed_ports(client) -> set[int]:
    """The local ports of the web processes' delta subscriptions to this hub's Redis DB."""
    db = int(urlsplit(live_hub.REDIS_URL).path.strip("/") or 0)
    return {int(entry["addr"].rsplit(":", 1)[1]) for entry in client.client_list()
            if entry.get("name") == FEED_CLIENT_NAME and int(entry.get("db", -1)) == db}


class Probe:
    """One sample of everything a figure is taken from; `take` runs in the sampling thread."""

    def __init__(self, *, pids: dict[str, int], postmaster: int | None):
        import redis

        self.client = redis.Redis.from_url(live_hub.REDIS_URL, socket_timeout=10)
        self.redis_pid = int(self.client.info("server")["process_id"])
        self.pids, self.postmaster = pids, postmaster

    def take(self) -> dict:
        at = time.time()
        ticks = {name: cpu.process_ticks(pid) for name, pid in self.pids.items()}
        ticks["postgres"] = cpu.tree_ticks(self.postmaster) if self.postmaster else None
        ticks["redis"] = cpu.process_ticks(self.redis_pid)
        ticks["client"] = cpu.process_ticks(os.getpid())
        return {"at": at, "ticks": ticks, "machine": cpu.machine_ticks(),
                "redis_out": int(self.client.info("stats")["total_net_output_bytes"]),
                "received": bytes_from_redis()}


@contextlib.contextmanager
def sampling(probe: Probe):
    """Samples from a thread every SAMPLE_INTERVAL seconds while the block runs, one at each end."""
    samples, done = [], threading.Event()

    def sample_until_done():
        samples.append(probe.take())
        while not done.wait(SAMPLE_INTERVAL):
            samples.append(probe.take())

    thread = threading.Thread(target=sample_until_done, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()
        samples.append(probe.take())


# --- Figures between two samples ----------------------------------------------------------------

HZ = os.sysconf("SC_CLK_TCK")


def cpu_ms(first: dict, last: dict, name: str) -> float | None:
    before, after = first["ticks"].get(name), last["ticks"].get(name)
    return None if before is None or after is None else (after - before) / HZ * 1000


def per_thousand(value: float | None, deltas: int) -> float | None:
    return None if value is None or not deltas else round(value / deltas * 1000, 2)


def cpu_figures(first: dict, last: dict, deltas: int, background: dict) -> dict:
    """CPU ms per 1,000 deltas by role, and for the web processes and workers each process's."""
    seconds = last["at"] - first["at"]
    names = sorted(first["ticks"])
    webs = [cpu_ms(first, last, name) for name in names if name.startswith("daphne")]
    workers = [cpu_ms(first, last, name) for name in names if name.startswith("worker")]
    redis = cpu_ms(first, last, "redis")
    if redis is not None:  # the server is shared: less what it spent while this hub idled
        redis = max(0.0, redis - background["redis_cpu_ms_per_s"] * seconds)
    roles = {"web": sum(webs) if None not in webs else None,
             "workers": sum(workers) if None not in workers else None,
             "postgres": cpu_ms(first, last, "postgres"), "redis": redis}
    hub_total = sum(value for value in roles.values() if value is not None)
    figures = {role: per_thousand(value, deltas) for role, value in roles.items()}
    busy, total = last["machine"][0] - first["machine"][0], last["machine"][1] - first["machine"][1]
    return {
        **figures,
        "hub_total": per_thousand(hub_total, deltas),
        "web_per_process": [per_thousand(value, deltas) for value in webs],
        "workers_per_process": [per_thousand(value, deltas) for value in workers],
        "client": per_thousand(cpu_ms(first, last, "client"), deltas),
        # One core-second of the whole hub (all roles together) carries this many deltas.
        "deltas_per_core_second": round(deltas / (hub_total / 1000)) if hub_total else None,
        "cores_used": {role: None if value is None else round(value / 1000 / seconds, 2)
                       for role, value in roles.items()},
        "machine_busy": round(busy / total, 2) if total else None,
    }


def received_since(first: dict, last: dict, pids: set[int], ports: set[int] | None = None) -> int:
    """Bytes Redis sent to these processes' connections (or to these ports) between two samples.
    A connection that closed meanwhile is not counted: the streaming path keeps its own open."""
    total = 0
    for port, (pid, received) in last["received"].items():
        if pid in pids and (ports is None or port in ports):
            before = first["received"].get(port)
            total += received - (before[1] if before and before[0] == pid else 0)
    return total


def byte_figures(first: dict, last: dict, deltas: int, *, pids: dict[str, int], feeds: set[int],
                 background: dict) -> dict:
    web_pids = {pid for name, pid in pids.items() if name.startswith("daphne")}
    worker_pids = {pid for name, pid in pids.items() if name.startswith("worker")}
    to_web = received_since(first, last, web_pids)
    to_workers = received_since(first, last, worker_pids)
    to_feeds = received_since(first, last, web_pids, feeds)
    server = last["redis_out"] - first["redis_out"] - background["redis_bytes_per_s"] * (last["at"] - first["at"])

    def per_delta(value):
        return round(value / deltas, 1) if deltas else None

    return {"to_hub": per_delta(to_web + to_workers), "to_delta_feeds": per_delta(to_feeds),
            "to_web_processes": per_delta(to_web), "to_workers": per_delta(to_workers),
            "server_total_less_background": per_delta(max(0.0, server))}


def steady_window(watches: list[dict], samples: list[dict]) -> tuple[str, dict, dict]:
    """The samples that bound the time every stream was streaming, where a delta's cost is the
    streaming's own; if that was too short, the whole round's first and last samples."""
    if watches and all(w["first"] for w in watches):
        start, end = max(w["first"] for w in watches), min(w["last"] for w in watches)
        inside = [s for s in samples if start <= s["at"] <= end]
        if len(inside) >= 2 and inside[-1]["at"] - inside[0]["at"] >= MIN_WINDOW_S:
            return "all_streaming", inside[0], inside[-1]
    return "whole_round", samples[0], samples[-1]


def deltas_between(watches: list[dict], start: float, end: float) -> int:
    return sum(start <= received <= end for w in watches for received in w["received"])


# --- One level, one layout ----------------------------------------------------------------------

def background_rates(probe: Probe) -> dict:
    """What the shared Redis server sent and spent a second while this hub idled just before a
    level (other work on the machine, and these samples): taken off the level's server figures."""
    with sampling(probe) as samples:
        time.sleep(BACKGROUND_SECONDS)
    first, last = samples[0], samples[-1]
    seconds = last["at"] - first["at"]
    return {"redis_bytes_per_s": round((last["redis_out"] - first["redis_out"]) / seconds),
            "redis_cpu_ms_per_s": round((cpu_ms(first, last, "redis") or 0) / seconds, 2)}


def measure_level(hub, tabs: list[dict], probe: Probe) -> dict:
    feeds = delta_feed_ports(probe.client)
    background = background_rates(probe)
    floor = streaming.start_floor()
    with streaming.no_client_collections(), sampling(probe) as samples:
        watches = asyncio.run(streaming.stream_round(hub.port, tabs))
    figures = streaming.stream_figures(watches)
    floor_p99 = streaming.floor_result(floor)["p99_ms"]
    kind, first, last = steady_window(watches, samples)
    seconds = last["at"] - first["at"]
    deltas = deltas_between(watches, first["at"], last["at"]) if kind == "all_streaming" else figures["delta_events"]
    p99 = figures["latency_p99_ms"]
    return {
        "streams": len(tabs),
        "streams_complete": figures["streams_complete"],
        "gaps": figures["gaps"],
        "delta_events_per_second": figures["delta_events_per_second"],
        "delta_events_per_second_steady": round(deltas / seconds, 1) if seconds else None,
        "latency_p50_ms": figures["latency_p50_ms"],
        "latency_p99_ms": p99,
        "latency_p99_ms_all_streaming": figures["latency_p99_ms_all_streaming"],
        "floor_p99_ms": floor_p99,
        "p99_over_floor_ms": None if p99 is None or floor_p99 is None else round(p99 - floor_p99, 2),
        "within_bound": p99 is not None and floor_p99 is not None and p99 <= floor_p99 + TARGET_MS,
        "window": {"kind": kind, "seconds": round(seconds, 2), "deltas": deltas},
        "cpu_ms_per_1000_deltas": cpu_figures(first, last, deltas, background),
        "redis_bytes_per_delta": byte_figures(first, last, deltas, pids=probe.pids, feeds=feeds,
                                              background=background),
        "redis_background": background,
    }


def median_round(rounds: list[dict]) -> dict:
    """With several rounds, the one of median p99 (whole, so its figures belong together)."""
    ordered = sorted(rounds, key=lambda r: r["latency_p99_ms"] if r["latency_p99_ms"] is not None else float("inf"))
    return {**ordered[len(ordered) // 2], "latency_p99_ms_each_round": [r["latency_p99_ms"] for r in rounds]}


def measure_layout(hub, streams: list[dict], *, webs: int, workers: int, concurrency: int) -> dict:
    ports = start_layout(hub, webs=webs, workers=workers, concurrency=concurrency)
    tabs = spread_tabs(streams, ports)
    probe = Probe(pids=pids_by_process(hub), postmaster=postmaster_pid(hub.dsn))
    log(f"{webs} web, {workers} worker process(es): warming up (imports, each web process's feed)")
    asyncio.run(streaming.stream_round(hub.port, tabs[:2 * webs]))
    floor_idle = streaming.floor_result(streaming.start_floor())
    levels = {}
    for size in LEVELS:
        log(f"{webs} web, {workers} worker process(es): {size} streams")
        levels[str(size)] = median_round([measure_level(hub, tabs[:size], probe) for _ in range(ROUNDS)])
        log(f"  {levels[str(size)]['delta_events_per_second_steady']} deltas/s, "
            f"p99 {levels[str(size)]['latency_p99_ms']} ms (floor {levels[str(size)]['floor_p99_ms']} ms)")
    return {"webs": webs, "workers": workers, "floor_idle": floor_idle,
            "postgres_measured": probe.postmaster is not None, "by_streams": levels, **layout_summary(levels)}


# --- Summaries -----------------------------------------------------------------------------------

def rate(level: dict) -> float:
    return level["delta_events_per_second_steady"] or level["delta_events_per_second"] or 0


def layout_summary(levels: dict) -> dict:
    """The most deltas a second within bound, and what a delta cost there (at the lowest level if
    none kept within it); the bytes per delta, median over the levels."""
    within = [(size, level) for size, level in levels.items() if level["within_bound"]]
    size, best = max(within, key=lambda item: rate(item[1])) if within else (None, None)
    costed = best or levels[min(levels, key=int)]
    keys = costed["redis_bytes_per_delta"]
    return {
        "max_deltas_per_second_within_bound": rate(best) if best else None,
        "at_streams": int(size) if size else None,
        "cpu_ms_per_1000_deltas": costed["cpu_ms_per_1000_deltas"],
        "redis_bytes_per_delta": {key: median([lv["redis_bytes_per_delta"][key] for lv in levels.values()])
                                  for key in keys},
    }


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 1) if values else None


def bytes_by_webs(layouts: dict) -> dict:
    """Redis bytes per delta for each number of web processes (median over worker counts), and
    the ratio of the most web processes' to one's: near 1 is flat, 2 is every process hearing all."""
    by_webs = {}
    for webs in WEBS:
        mine = [layout["redis_bytes_per_delta"] for layout in layouts.values() if layout["webs"] == webs]
        by_webs[str(webs)] = {key: median([figures[key] for figures in mine]) for key in mine[0]}
    if len(WEBS) < 2:
        return by_webs
    low, high = by_webs[str(min(WEBS))], by_webs[str(max(WEBS))]
    ratios = {key: round(high[key] / low[key], 2) if high[key] and low[key] else None for key in low}
    by_webs[f"ratio_{max(WEBS)}_to_{min(WEBS)}"] = ratios
    by_webs["flat_limit"] = FLAT_RATIO_LIMIT
    by_webs["flat"] = {key: ratios[key] is not None and ratios[key] <= FLAT_RATIO_LIMIT
                       for key in ("to_delta_feeds", "to_hub")}
    return by_webs


def by_layout(layouts: dict) -> dict:
    return {name: {"max_deltas_per_second_within_bound": layout["max_deltas_per_second_within_bound"],
                   "at_streams": layout["at_streams"],
                   "levels": {size: {"deltas_per_second": rate(level), "p99_ms": level["latency_p99_ms"],
                                     "floor_p99_ms": level["floor_p99_ms"], "within_bound": level["within_bound"]}
                              for size, level in layout["by_streams"].items()},
                   "cpu_ms_per_1000_deltas": {key: value for key, value in layout["cpu_ms_per_1000_deltas"].items()
                                              if key not in ("cores_used", "machine_busy")}}
            for name, layout in layouts.items()}


def run() -> dict:
    began = time.monotonic()
    speed = cpu.python_speed_ms()  # before anything runs: the cores' own speed today
    log(f"a million Python additions take {speed} ms on this machine now")
    # Each worker could hold every turn of the largest level: how Celery spreads the turns over
    # the workers then changes nothing but which process runs them.
    concurrency = max(LEVELS)
    layouts = {}
    with live_hub.running_hub(database=DATABASE, workers=0, concurrency=1,
                              connections=max(WORKER_COUNTS) * concurrency + 100) as hub:
        live_hub.setup_django(hub.env)
        streams = streaming.make_streams(max(LEVELS))
        live_hub.close_django_connections()
        for webs in WEBS:
            for workers in WORKER_COUNTS:
                layouts[f"web{webs}_workers{workers}"] = measure_layout(hub, streams, webs=webs, workers=workers,
                                                                        concurrency=concurrency)
    return {
        "config": {"levels": list(LEVELS), "webs": list(WEBS), "workers": list(WORKER_COUNTS), "rounds": ROUNDS,
                   "threads_per_worker": concurrency, "target_ms_over_floor": TARGET_MS,
                   "pieces_per_second_per_stream": round(1 / streaming.DELAY), "tabs": "alternating over web processes",
                   "sessions": live_hub.SESSIONS},
        "python_speed_ms": speed,
        "redis_bytes_per_delta_by_webs": bytes_by_webs(layouts),
        "by_layout": by_layout(layouts),
        "layouts": layouts,
        "retried_connects": streaming.RETRIED_CONNECTS["count"],
        "elapsed_s": round(time.monotonic() - began, 1),
    }
