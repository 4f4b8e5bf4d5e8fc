"""Is the hub working? Probes of the database, Redis and the broker, the workers' heartbeats and
the state of the run queue — for the staff health page, and a yes/no for /healthz.

Nothing here reveals a connection string or a secret: only whether each part answers, how fast,
and counts.
"""

import functools
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from agents_app import workers
from agents_app.models import Run, Worker

# A queued run older than this with nobody taking it is worth a look.
QUEUE_WAIT_WARNING = timedelta(minutes=1)


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
def _redis_client(url: str):
    """One client (and connection pool) per URL: probes come every few seconds."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def probe_redis() -> Probe:
    if not settings.REDIS_URL:
        return Probe("Redis", True, "not used: embedded mode keeps the channel layer and cache in memory")
    try:
        client = _redis_client(settings.REDIS_URL)

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
    )


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
    live = [w for w in report.workers if w.state == "live"]
    if not live:
        report.problems.append("No worker is alive: nothing will answer. Start `celery -A hub worker` "
                               "(or `make run` in embedded mode).")
    if queue.oldest_wait is not None and queue.oldest_wait > QUEUE_WAIT_WARNING:
        report.problems.append(f"The oldest queued run has waited {int(queue.oldest_wait.total_seconds())} s: "
                               "workers are busy, stopped, or never got it (see Repair).")
    if queue.past_lease:
        report.problems.append(f"{queue.past_lease} run{'s' * (queue.past_lease != 1)} running past the lease: "
                               "is `celery -A hub beat` running? Repair recovers them now.")
    return report


def ready() -> bool:
    """For /healthz: the database answers, and Redis when the hub uses it. Says nothing else."""
    probes = [probe_database()]
    if settings.REDIS_URL:
        probes.append(probe_redis())
    return all(p.ok for p in probes)
