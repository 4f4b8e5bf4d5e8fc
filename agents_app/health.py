"""Is the hub working? Probes of the database, Redis and the broker, the workers' heartbeats and
the state of the run queue — for the staff health page and hub_repair, and a yes/no for /healthz.

Nothing here reveals a connection string or a secret: only whether each part answers, how fast,
and counts.
"""

import contextlib
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from agents_app import workers
from agents_app.models import Run, Worker

START_A_WORKER = "Start `celery -A hub worker` (or `make run` in embedded mode)."
# /healthz answers within this long even when a service hangs (takes the connection, never answers).
READY_DEADLINE_SECONDS = 2.0


def queued_warning() -> timedelta:
    """How long a run may wait in the queue before it is reported (HUB_QUEUED_WARNING_SECONDS)."""
    return timedelta(seconds=float(getattr(settings, "HUB_QUEUED_WARNING_SECONDS", 60.0)))


@dataclass
class Probe:
    name: str
    ok: bool
    detail: str
    ms: float | None = None


def _timed(fn):
    started = time.perf_counter()
    detail = fn()
    return detail, round((time.perf_counter() - started) * 1000, 1)


def probe_database() -> Probe:
    def ask():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        if connection.vendor == "postgresql":
            version = connection.pg_version
            return f"PostgreSQL {version // 10000}.{version % 10000}"
        if connection.vendor == "sqlite":
            import sqlite3

            return f"SQLite {sqlite3.sqlite_version} (embedded mode)"
        return connection.vendor

    try:
        detail, ms = _timed(ask)
        return Probe("Database", True, detail, ms)
    except Exception as exc:
        return Probe("Database", False, f"does not answer: {type(exc).__name__}")


@functools.lru_cache(maxsize=4)
def _redis_client(config):
    """One client (and connection pool) per configuration: probes come every few seconds. One
    attempt per command: redis-py's retries with backoff would keep a probe of a dead Redis waiting."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return config.client(socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))


def probe_redis() -> Probe:
    if not settings.REDIS_URL:
        return Probe("Redis", True, "not used: embedded mode keeps the channel layer and cache in memory")
    try:
        client = _redis_client(settings.HUB_REDIS)

        def ask():
            client.ping()
            info = client.info()
            return f"Redis {info.get('redis_version', '?')}, {info.get('used_memory_human', '?')} used"

        detail, ms = _timed(ask)
        return Probe("Redis", True, detail, ms)
    except Exception as exc:
        return Probe("Redis", False, f"does not answer: {type(exc).__name__}")


def probe_broker() -> Probe:
    from hub.celery import app

    if settings.CELERY_BROKER_URL.startswith("memory://"):
        return Probe("Broker", True, "in memory, inside this process (embedded mode)")
    try:
        def ask():
            with app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
                waiting = conn.default_channel.client.llen(app.conf.task_default_queue)
            return f"{conn.transport_cls}; {waiting} task{'s' * (waiting != 1)} waiting in the queue"

        detail, ms = _timed(ask)
        return Probe("Broker", True, detail, ms)
    except Exception as exc:
        return Probe("Broker", False, f"does not answer: {type(exc).__name__}")


@dataclass
class WorkerState:
    worker: Worker
    state: str  # live, silent, stopped
    running: int = 0

    @property
    def heartbeat_age(self) -> float:
        return (timezone.now() - self.worker.heartbeat_at).total_seconds()


def worker_state(worker: Worker) -> str:
    """stopped (said goodbye), silent (no heartbeat for three beats) or live."""
    if worker.stopped_at is not None:
        return "stopped"
    silent_after = timedelta(seconds=workers.heartbeat_seconds() * 3)
    return "silent" if timezone.now() - worker.heartbeat_at > silent_after else "live"


def worker_states() -> list[WorkerState]:
    """Every worker that reported in the last day, live ones first, with the runs each is running."""
    owners = {}
    for owner in Run.objects.filter(status=Run.Status.RUNNING).values_list("lease_owner", flat=True):
        host, _, rest = (owner or "").partition(":")
        owners.setdefault((host, rest.split(":", 1)[0]), 0)
        owners[(host, rest.split(":", 1)[0])] += 1
    states = []
    for worker in Worker.objects.order_by("-heartbeat_at"):
        running = sum(owners.get((worker.host, str(pid)), 0) for pid in {worker.pid, *worker.pids})
        states.append(WorkerState(worker=worker, state=worker_state(worker), running=running))
    order = {"live": 0, "silent": 1, "stopped": 2}
    return sorted(states, key=lambda s: order[s.state])


@dataclass
class RunQueue:
    queued: int
    running: int
    oldest_queued: Run | None
    past_lease: int
    failed_last_hour: int
    waiting: int = 0  # queued for longer than HUB_QUEUED_WARNING_SECONDS

    @property
    def oldest_wait(self) -> timedelta | None:
        return timezone.now() - self.oldest_queued.created_at if self.oldest_queued else None


def run_queue() -> RunQueue:
    now = timezone.now()
    counts = dict(Run.objects.filter(status__in=Run.LIVE)
                  .values_list("status").annotate(n=Count("id")))
    oldest = (Run.objects.filter(status=Run.Status.QUEUED).select_related("agent", "chat")
              .order_by("created_at").first())
    return RunQueue(
        queued=counts.get(Run.Status.QUEUED, 0), running=counts.get(Run.Status.RUNNING, 0), oldest_queued=oldest,
        past_lease=Run.objects.filter(status=Run.Status.RUNNING, lease_expires_at__lt=now).count(),
        failed_last_hour=Run.objects.filter(status=Run.Status.FAILED,
                                            finished_at__gte=now - timedelta(hours=1)).count(),
        waiting=(Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=now - queued_warning()).count()
                 if oldest is not None else 0),
    )


# --- What the workers and the queue say, in words (the health page and hub_repair) -----------

def _seconds(delta: timedelta) -> int:
    return max(0, int(delta.total_seconds()))


def no_live_worker_problem(states: list[WorkerState]) -> str | None:
    """"No worker is alive …" with when one was last heard from; None while one is."""
    if any(s.state == "live" for s in states):
        return None
    if not states:
        return f"No worker is alive: none has reported in the last day, so nothing will answer. {START_A_WORKER}"
    last = max(states, key=lambda s: s.worker.heartbeat_at)
    how = "stopped" if last.state == "stopped" else "went silent"
    return (f"No worker is alive: nothing will answer. The last one ({last.worker.name}) {how}; its last "
            f"heartbeat was {int(last.heartbeat_age)} s ago. {START_A_WORKER}")


def waiting_runs_problem(queue: RunQueue, states: list[WorkerState]) -> str | None:
    """Runs queued longer than HUB_QUEUED_WARNING_SECONDS, and the likely reason; None if none."""
    if not queue.waiting or queue.oldest_wait is None:
        return None
    live = sum(s.state == "live" for s in states)
    runs = f"{queue.waiting} run{'s' * (queue.waiting != 1)}"
    said = (f"{runs} queued longer than {_seconds(queued_warning())} s (the oldest queued run has waited "
            f"{_seconds(queue.oldest_wait)} s)")
    if not live:
        return f"{said}: no worker is alive to take them. {START_A_WORKER}"
    return (f"{said}, with {live} live worker{'s' * (live != 1)}: they are all busy, do not read the queue, "
            "or never got them (see Repair).")


@dataclass
class Health:
    probes: list[Probe]
    workers: list[WorkerState]
    queue: RunQueue
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def health() -> Health:
    """Everything the staff health page shows, and the problems it sees in plain words."""
    probes = [probe_database(), probe_redis(), probe_broker()]
    report = Health(probes=probes, workers=[], queue=RunQueue(0, 0, None, 0, 0))
    report.problems = [f"{p.name} {p.detail}" for p in probes if not p.ok]
    if not probes[0].ok:
        return report
    report.workers = worker_states()
    report.queue = queue = run_queue()
    for problem in (no_live_worker_problem(report.workers), waiting_runs_problem(queue, report.workers)):
        if problem:
            report.problems.append(problem)
    if queue.past_lease:
        report.problems.append(f"{queue.past_lease} run{'s' * (queue.past_lease != 1)} running past the lease: "
                               "is `celery -A hub beat` running? Repair recovers them now.")
    return report


# /healthz's probes run here, so a service that hangs keeps a probe thread waiting, not the answer.
_READY_PROBES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hub-healthz")
_ready_lock = threading.Lock()
_ready_running: dict = {}


def _probe_database_once() -> Probe:
    """probe_database on a connection of its own (this probe thread's), closed after it."""
    try:
        return probe_database()
    finally:
        with contextlib.suppress(Exception):  # closing a broken connection may fail too
            connection.close()


def _ready_probe(name: str, probe):
    """The probe's future: a new one, or the one still running (a hung service keeps one thread,
    however often /healthz is asked)."""
    with _ready_lock:
        future = _ready_running.get(name)
        if future is None or future.done():
            future = _ready_running[name] = _READY_PROBES.submit(probe)
        return future


def ready() -> bool:
    """For /healthz: the database answers, and Redis when the hub uses it, within
    READY_DEADLINE_SECONDS (both are asked at once). Says nothing else."""
    futures = [_ready_probe("database", _probe_database_once)]
    if settings.REDIS_URL:
        futures.append(_ready_probe("redis", probe_redis))
    done, _ = wait_for_futures(futures, timeout=READY_DEADLINE_SECONDS)
    return len(done) == len(futures) and all(f.result().ok for f in futures)
