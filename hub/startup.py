"""What a long-running process (Daphne, a Celery worker) does once it has started."""

import gc


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
