"""Worker heartbeats: every Celery worker keeps a row saying who it is and that it is alive.

A Celery bootstep (added to every worker, the CLI ones and the embedded one of runhub) writes the
worker's row when it starts, refreshes it every HUB_WORKER_HEARTBEAT_SECONDS from a thread of its
own, and marks it stopped when the worker shuts down. The health page reads these rows; a worker
killed with SIGKILL simply stops refreshing its row and shows as silent.

The row lists the pids that run turns (the worker itself, or its pool children), so a run's
lease owner (`host:pid:thread`) can be matched to the worker that holds it.
"""

import logging
import os
import socket
import threading
from datetime import timedelta

from celery import bootsteps
from django.conf import settings
from django.db import connections
from django.utils import timezone

from agents_app.models import Worker
from agents_app.turns import peers

log = logging.getLogger(__name__)

# Rows of workers that stopped (or went silent) longer ago than this are removed.
FORGET_AFTER = timedelta(days=1)


def heartbeat_seconds() -> float:
    return float(getattr(settings, "HUB_WORKER_HEARTBEAT_SECONDS", 10.0))


def pool_pids(pool) -> list[int]:
    """The processes that run this worker's tasks: pool children (prefork) or the worker itself."""
    children = getattr(getattr(pool, "_pool", None), "_pool", None)
    pids = [p.pid for p in children or [] if getattr(p, "pid", None)]
    return pids or [os.getpid()]


def record_heartbeat(*, name: str, pool: str, concurrency: int, pids: list[int], started_at) -> None:
    """Insert or refresh this worker's row (and forget workers gone for a day)."""
    now = timezone.now()
    Worker.objects.update_or_create(
        name=name,
        defaults={"host": socket.gethostname(), "pid": os.getpid(), "pids": pids, "pool": pool,
                  "concurrency": concurrency, "started_at": started_at, "heartbeat_at": now, "stopped_at": None},
    )
    Worker.objects.filter(heartbeat_at__lt=now - FORGET_AFTER).delete()


def record_stopped(*, name: str) -> None:
    Worker.objects.filter(name=name, pid=os.getpid()).update(stopped_at=timezone.now())


class Heartbeat(bootsteps.StartStopStep):
    """The bootstep: start the heartbeat thread with the pool, stop it with the worker."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self._stop = threading.Event()
        self._thread = None
        self._watch = None

    def start(self, worker):
        self._stop.clear()
        started_at = timezone.now()
        pool_name = type(worker.pool).__module__.rsplit(".", 1)[-1] if worker.pool else ""

        def beat():
            while True:
                try:
                    record_heartbeat(name=worker.hostname, pool=pool_name, concurrency=worker.concurrency or 0,
                                     pids=pool_pids(worker.pool), started_at=started_at)
                except Exception:
                    # A database that is down for a moment must not stop the worker; the health
                    # page shows the worker as silent until the next beat gets through.
                    log.warning("worker heartbeat could not be written", exc_info=True)
                finally:
                    connections.close_all()  # this thread's own connections
                if self._stop.wait(heartbeat_seconds()):
                    return

        self._thread = threading.Thread(target=beat, name="hub-worker-heartbeat", daemon=True)
        self._thread.start()
        # The fast beat in Redis, by which workers find a dead peer's turns at once (agents_app.turns.peers).
        self._watch = peers.Watch(lambda: pool_pids(worker.pool))
        self._watch.start()

    def stop(self, worker):
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        try:
            record_stopped(name=worker.hostname)
        except Exception:
            log.warning("could not mark worker %s stopped", worker.hostname, exc_info=True)
        finally:
            connections.close_all()

    terminate = stop


def install(app) -> None:
    """Add the heartbeat to every worker this Celery app starts."""
    app.steps["worker"].add(Heartbeat)
