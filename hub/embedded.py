"""The pieces runhub starts inside one process: a real Celery worker (threads pool), supervised,
beat, and the model clients' set-up in the background.

With no REDIS_URL the broker is kombu's in-memory transport, which only works inside one
process, so the worker must live here. With REDIS_URL the same worker simply joins the others.
"""

import logging
import socket
import threading
import time

from celery import beat
from celery.platforms import EX_OK
from celery.worker import state as worker_state

from hub.celery import app, model_clients_in_use, set_up_model_clients
from hub.startup import freeze_startup_heap

log = logging.getLogger(__name__)

FIRST_RESTART_SECONDS = 1.0  # the pause before the first restart; it doubles up to the cap
MAX_RESTART_SECONDS = 60.0
STOP_SECONDS = 5.0  # how long a worker gets to stop itself when asked (its loop turns every second)
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
                worker_state.should_stop = None  # a stop asked of an earlier worker is not this one's
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
        # Asked as Celery's own warm-shutdown signal handler asks: the worker's loop sees the flag
        # at its next turn and stops itself, in its own thread. Stopped from this thread instead
        # (controller.stop), the shutdown can read a Redis connection the loop is about to read,
        # and leave the loop blocked on that socket for good.
        with self._lock:
            self._stopping.set()
            worker_state.should_stop = EX_OK
        self.thread.join(timeout=STOP_SECONDS)
        # Failing that, asked again from here until the thread ends: a worker made just before
        # the stop may only start running after the first request (which then found nothing).
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


class ModelClientWarmUp:
    """The model clients set up in a thread of its own (hub.celery.set_up_model_clients) while the
    hub starts, so the first turn does not wait for them.

    The OpenAI client first, at once, beside the migration: the default provider, and the one
    every OpenAI-compatible server and Ollama use. runhub waits for it before it listens (a few
    tenths of a second at most), so a turn sent with the first page finds it ready. Then, once
    the database is migrated (database_ready), the other clients the agents use, while the hub
    serves; only those, because a turn running beside a long import gets a fraction of the
    interpreter's time. A turn that needs a client still being set up waits only for that import.
    """

    def __init__(self):
        self.thread = threading.Thread(target=self._run, name="model-client-warm-up", daemon=True)
        self._openai_ready = threading.Event()
        self._database_ready = threading.Event()

    def start(self) -> None:
        self.thread.start()

    def wait_for_the_openai_client(self) -> None:
        self._openai_ready.wait()

    def database_ready(self) -> None:
        self._database_ready.set()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            set_up_model_clients({"openai"})
        except Exception:
            log.warning("could not set the OpenAI client up in advance", exc_info=True)
        finally:
            self._openai_ready.set()
        self._database_ready.wait()
        # When the agents cannot be read, the first turn of each other client sets it up.
        others = model_clients_in_use(when_unknown=set()) - {"openai"}
        if not others:
            return  # the OpenAI client was set up before runhub imported hub.asgi, which froze the heap
        try:
            set_up_model_clients(others)
        except Exception:
            # A broken optional client is reported by the turn that needs it, not at start-up.
            log.warning("could not set the model clients %s up in advance", sorted(others), exc_info=True)
            return
        freeze_startup_heap()  # what the imports left behind lives as long as the process
        log.debug("model clients set up in %.1f s", time.monotonic() - started)
