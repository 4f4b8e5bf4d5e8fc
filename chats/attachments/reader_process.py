"""Reading a file's text in a child process of its own, under a time and a memory limit.

Parsers of PDF and office files meet hostile files (a page that loops, a stream that inflates to
gigabytes); in a worker's own process such a file could hold a thread for ever or take the
worker's memory, and every other turn of that worker with it. The child runs
`chats.attachments.reading.read_text` with its address space capped (RLIMIT_AS) and is killed at
READ_SECONDS; it tells its progress a line at a time ("pages N") and ends with one line of JSON.
Either limit reached is an Unreadable the user is shown.

A worker process reads at most HUB_FILE_READS_AT_ONCE files at once (reader_slot): a burst of
uploads would otherwise start a child of up to 1 GB on every worker thread, and take the
threads turns need. A read that finds no free slot raises ReadersBusy; its task goes back to the
queue for a moment (chats.tasks.read_file) instead of waiting on a worker thread.
"""

import contextlib
import json
import resource
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings

from chats.attachments.reading import Reading, Unreadable, read_text

READ_SECONDS = 120
MEMORY_BYTES = 1024 * 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]


class ReadersBusy(Exception):
    """This process already reads HUB_FILE_READS_AT_ONCE files."""


_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _reader_slots() -> threading.BoundedSemaphore:
    """This process's slots, made on first use: not at import, as the reader's own child imports
    this module without Django's settings. A prefork worker's main process reads no file, so
    each pool child makes its own."""
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(settings.HUB_FILE_READS_AT_ONCE)
        return _slots


@contextlib.contextmanager
def reader_slot():
    """Hold one of this process's reading slots; ReadersBusy at once when none is free."""
    slots = _reader_slots()
    if not slots.acquire(blocking=False):
        raise ReadersBusy
    try:
        yield
    finally:
        slots.release()


def read_in_child(path, content_type: str, *, progress=None, seconds: float = READ_SECONDS) -> Reading:
    """read_text(path, content_type) in a child process; progress(pages) as it goes."""
    child = subprocess.Popen([sys.executable, "-m", "chats.attachments.reader_process", str(path), content_type],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             preexec_fn=_cap_memory)
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        child.kill()

    timer = threading.Timer(seconds, stop)
    timer.start()
    answer = None
    try:
        for line in child.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "pages" and progress is not None:
                progress(int(rest))
            elif kind in ("read", "unreadable"):
                answer = (kind, json.loads(rest))
        child.wait()
    finally:
        timer.cancel()
        child.stdout.close()
    if answer is None:
        if timed_out.is_set():
            raise Unreadable(f"reading took longer than {seconds:.0f} seconds: stopped")
        raise Unreadable(f"reading needed more than {MEMORY_BYTES // 2**20:,} MB of memory: stopped")
    kind, value = answer
    if kind == "unreadable":
        raise Unreadable(value)
    return Reading(text=value["text"], pages=value["pages"], stopped=value["stopped"])


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def _main(path: str, content_type: str) -> int:
    try:
        reading = read_text(path, content_type, progress=lambda pages: print("pages", pages, flush=True))
    except Unreadable as exc:
        print("unreadable", json.dumps(str(exc)), flush=True)
        return 0
    except MemoryError:
        return 3
    print("read", json.dumps({"text": reading.text, "pages": reading.pages, "stopped": reading.stopped}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2]))
