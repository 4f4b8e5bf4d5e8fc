"""What a long-running process (Daphne, a Celery worker) does once it has started."""

import gc
import logging
import os
import sys
import threading

from django.conf import settings

log = logging.getLogger(__name__)


def freeze_startup_heap() -> None:
    """Put everything allocated so far out of the cyclic garbage collector's sight.

    Django, Celery and pydantic-ai leave a heap of long-lived objects behind at import; each full
    collection walked all of them and stopped the process for over 100 ms, every thread at once:
    a worker's streams and a web process's sockets all stalled (the streaming benchmark's worst
    latencies). Frozen objects are never collected, which suits objects that live as long as the
    process anyway.
    """
    gc.collect()
    gc.freeze()


def leave_upload_bodies_to_django() -> None:
    """Stop Twisted parsing every form POST's body on Daphne's one thread.

    Twisted's Request parses a multipart or URL-encoded body into its own `args` before Daphne
    hands the request on; Daphne never reads them (Django parses the body itself, in chunks, in a
    thread of its own). That parse reads the whole body into memory and runs the `email` package
    over it on the thread that also relays every websocket frame: a 24 MB upload took 0.75 s and
    held every streaming reply of the process for as long (bench/files.py). Twisted's
    `parsePOSTFormSubmission=False` turns it off; Daphne does not expose it, so its request
    class gets it as a default here. Safe to call more than once.
    """
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest.__init__, "leaves_bodies_to_django", False):
        return
    original = WebRequest.__init__

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    __init__.leaves_bodies_to_django = True
    WebRequest.__init__ = __init__


def yield_to_streams() -> None:
    """Lower the calling thread's CPU priority to HUB_BACKGROUND_NICE (Linux only; never raises it).

    For the threads that start and end turns (Celery's task threads). The threads that stream a
    reply, a worker's model loop and a web process's event loop, keep their priority, and so do a
    web process's frame threads (chats.consumers.FRAME_THREADS). On a machine with every core
    busy, a burst of new turns then waits for the live streams instead of delaying their deltas
    (docs/decisions.md has the figures). Linux schedules each thread on its own, so one thread's
    nice leaves its process's other threads alone; a thread started later inherits it.
    """
    nice = settings.HUB_BACKGROUND_NICE
    if not nice or sys.platform != "linux":
        return
    thread_id = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, thread_id) < nice:
            os.setpriority(os.PRIO_PROCESS, thread_id, nice)
    except OSError:
        # A sandbox that forbids it only loses the ordering, never a turn.
        log.debug("could not lower the priority of thread %s", thread_id, exc_info=True)
