"""The pieces runhub starts inside one process: a real Celery worker (threads pool), supervised,
and beat.

With no REDIS_URL the broker is kombu's in-memory transport, which only works inside one
process, so the worker must live here. With REDIS_URL the same worker simply joins the others.
"""

import logging
import socket
import threading
import time

from celery import beat

from hub.celery import app

log = logging.getLogger(__name__)

FIRST_RESTART_SECONDS = 1.0  # the pause before the first restart; it doubles up to the cap
MAX_RESTART_SECONDS = 60.0
HEALTHY_SECONDS = 60.0  # a worker that ran this long before it stopped starts the backoff afresh


class EmbeddedWorker:
    """A real Celery worker in a thread, kept alive: when it stops without being asked to (an
    "Unrecoverable error" ends a Celery worker, whatever its cause), it is started again after a
    pause that doubles with each quick failure, and the log says so.

    The turns it was running are not lost: their leases run out and the sweeper recovers them;
    the new worker's start-up sweep re-sends the runs still queued.
    """

    def __init__(self, *, concurrency: int = 4):
        app.finalize(auto=True)
        app.set_current()
        app.set_default()
        self.concurrency = concurrency
        self.restarts = 0
        self.controller = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._supervise, name="celery-worker", daemon=True)

    def _new_controller(self):
        return app.WorkController(
            app=app,
            pool_cls="threads",
            concurrency=self.concurrency,
            hostname=f"embedded@{socket.gethostname()}",
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
        )

    def start(self) -> None:
        self.thread.start()

    def _supervise(self) -> None:
        pause = FIRST_RESTART_SECONDS
        while True:
            with self._lock:
                if self._stopping.is_set():
                    return
                self.controller = self._new_controller()
            started = time.monotonic()
            self.controller.start()  # returns once the worker has stopped
            if self._stopping.is_set():
                return
            if time.monotonic() - started >= HEALTHY_SECONDS:
                pause = FIRST_RESTART_SECONDS
            log.error("the in-process Celery worker stopped on its own (exit code %s); starting it again in %.0f s",
                      self.controller.exitcode, pause)
            if self._stopping.wait(pause):
                return
            self.restarts += 1
            pause = min(pause * 2, MAX_RESTART_SECONDS)

    def stop(self) -> None:
        self._stopping.set()
        # Asked again until the thread ends: a worker made just before the stop may only start
        # running after the first request (which then found nothing to stop).
        for _ in range(10):
            if not self.thread.is_alive():
                return
            with self._lock:
                controller = self.controller
            if controller is not None:
                controller.stop(in_sighandler=False)
            self.thread.join(timeout=1)


class EmbeddedBeat:
    """Celery beat in a thread, keeping its schedule in memory (nothing to clean up)."""

    def __init__(self):
        self.service = beat.EmbeddedService(app, thread=True, scheduler_cls="celery.beat:Scheduler")

    def start(self) -> None:
        self.service.start()

    def stop(self) -> None:
        self.service.stop()
