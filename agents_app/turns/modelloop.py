"""The worker process's model loop: one event loop thread that streams every turn's model and
relays their deltas.

A turn's Celery thread prepares the turn, hands the model run to this loop and then only wakes a
few times a second (checkpoint, heartbeat, stall). The loop runs every model of the process side
by side and, every FLUSH_SECONDS, sends what each of them streamed since the last tick to the
replay buffer and the chats' tabs in one Redis call; every fifth tick it looks up, in one call,
which of them were asked to stop.

Why one loop and not a loop per turn: a hundred turns each with its own loop thread, and a relay
thread waking twenty times a second, spent more CPU handing the GIL between threads than on the
models; the deltas of a tick also went out in a hundred Redis calls instead of one.
"""

import asyncio
import logging
import os
import threading
import time

import anyio.to_thread

from agents_app.turns import runs
from chats.streams import replay_buffer

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05  # deltas wait at most this long before they go out
CANCEL_POLL_TICKS = 5  # a live cancel is looked for every fifth tick (250 ms)
# Sync tools (the exactly-once wrapper, a delegation waiting on its child) run in threads that
# anyio limits per loop, 40 by default; every turn of the process shares this loop.
TOOL_THREADS = 256


class ModelLoop:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.turns: set = set()  # the turns whose model is streaming, touched on the loop only
        self.thread = threading.Thread(target=self._run, name="hub-model-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.create_task(self._relay(), name="hub-delta-relay")
        self.loop.run_forever()

    def submit(self, coroutine):
        """Run coroutine on the loop; returns a concurrent.futures.Future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    async def _relay(self) -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = TOOL_THREADS
        tick = 0
        while True:
            started = time.monotonic()
            tick += 1
            try:
                self.flush(self.turns)
            except Exception:
                # Live deltas are best effort: the replay buffer catches a tab up on reconnect.
                log.warning("could not relay deltas", exc_info=True)
            if tick % CANCEL_POLL_TICKS == 0:
                self.note_cancels()
            await asyncio.sleep(max(0.0, FLUSH_SECONDS - (time.monotonic() - started)))

    def note_cancels(self) -> None:
        """Tell each turn asked to stop (its thread acts on it); one look for all of them."""
        by_run = {turn.run.pk: turn for turn in self.turns}
        if not by_run:
            return
        try:
            cancelled = runs.cancelled_among(by_run)
        except Exception:
            log.warning("could not look for cancels; trying again", exc_info=True)
            return
        for run_id in cancelled:
            by_run[run_id].cancel_seen = True

    @staticmethod
    def flush(turns) -> None:
        """Send the streamed-but-unsent text of these turns, in one call to the replay buffer."""
        batch = [entry for turn in turns if (entry := turn.take_pending()) is not None]
        if batch:
            replay_buffer().stream_many(batch)


_model_loop: ModelLoop | None = None
_pid = None
_lock = threading.Lock()


def model_loop() -> ModelLoop:
    """This process's loop, started on first use (a forked child starts its own)."""
    global _model_loop, _pid
    with _lock:
        if _model_loop is None or _pid != os.getpid():
            _model_loop, _pid = ModelLoop(), os.getpid()
        return _model_loop
