"""The pieces runhub starts inside one process: a real Celery worker (threads pool) and beat.

With no REDIS_URL the broker is kombu's in-memory transport, which only works inside one
process, so the worker must live here. With REDIS_URL the same worker simply joins the others.
"""

import logging
import socket
import threading

from celery import beat

from hub.celery import app

log = logging.getLogger(__name__)


class EmbeddedWorker:
    def __init__(self, *, concurrency: int = 4):
        app.finalize(auto=True)
        app.set_current()
        app.set_default()
        self.controller = app.WorkController(
            app=app,
            pool_cls="threads",
            concurrency=concurrency,
            hostname=f"embedded@{socket.gethostname()}",
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
        )
        self.thread = threading.Thread(target=self.controller.start, name="celery-worker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        try:
            self.controller.stop(in_sighandler=False)
        finally:
            self.thread.join(timeout=10)


class EmbeddedBeat:
    """Celery beat in a thread, keeping its schedule in memory (nothing to clean up)."""

    def __init__(self):
        self.service = beat.EmbeddedService(app, thread=True, scheduler_cls="celery.beat:Scheduler")

    def start(self) -> None:
        self.service.start()

    def stop(self) -> None:
        self.service.stop()
