"""The worker process's model loop: one event loop thread that streams every turn's model and
relays their deltas.

A turn's Celery thread prepares the turn, hands the model run to this loop and then only wakes a
few times a second (checkpoint, heartbeat, stall). The loop runs every model of the process side
by side; its relay sends what they streamed to the replay buffer and the chats' tabs in one Redis
call. A piece that comes after a quiet moment goes out at once; while the models stream hard,
what comes within FLUSH_GAP_SECONDS of a flush waits for the next one, so a hundred streams cost
a bounded number of Redis calls. Every CANCEL_POLL_SECONDS the relay looks up, in one call, which
turns were asked to stop.

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

# After a flush the relay sends again no sooner than this. A fixed 50 ms window made every piece
# wait 25 ms on average, even a single stream's; with the gap, a stream of 50 pieces a second
# sends each at once, and 50 busy streams on a worker send at most 200 batches a second.
FLUSH_GAP_SECONDS = 0.005
CANCEL_POLL_SECONDS = 0.25  # how often a live cancel is looked for
# Sync tools (the exactly-once wrapper, a delegation waiting on its child) run in threads that
# anyio limits per loop, 40 by default; every turn of the process shares this loop.
TOOL_THREADS = 256


class ModelLoop:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._http_client = None
        self._http_client_lock = threading.Lock()
        self.turns: set = set()  # the turns whose model is streaming, touched on the loop only
        self._pieces = asyncio.Event()  # set when a turn has something to send; on the loop only
        self.thread = threading.Thread(target=self._run, name="hub-model-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.create_task(self._relay(), name="hub-delta-relay")
        self.loop.run_forever()

    def submit(self, coroutine):
        """Run coroutine on the loop; returns a concurrent.futures.Future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    @property
    def http_client(self):
        """The HTTP client of this loop's models (providers.build_model): every turn of the process
        reuses its open connections to the model server, where a client per turn paid for a new
        connection, TLS handshake and certificate store before its first token. Made on first use;
        used on this loop only."""
        with self._http_client_lock:
            if self._http_client is None:
                from pydantic_ai.models import create_async_httpx2_client

                self._http_client = create_async_httpx2_client()
            return self._http_client

    def wake(self) -> None:
        """On the loop: a turn has streamed something; the relay sends it as soon as it may."""
        self._pieces.set()

    async def _relay(self) -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = TOOL_THREADS
        cancels_looked_at = time.monotonic()
        while True:
            await self._wait_for_pieces(CANCEL_POLL_SECONDS)
            # The pieces already due on the loop (other turns' timers and reads) join this flush.
            await asyncio.sleep(0)
            try:
                self.flush(self.turns)
            except Exception:
                # Live deltas are best effort: the replay buffer catches a tab up on reconnect.
                log.warning("could not relay deltas", exc_info=True)
            if time.monotonic() - cancels_looked_at >= CANCEL_POLL_SECONDS:
                cancels_looked_at = time.monotonic()
                self.note_cancels()
            await asyncio.sleep(FLUSH_GAP_SECONDS)

    async def _wait_for_pieces(self, timeout: float) -> None:
        """Until a turn streamed something or timeout passed."""
        try:
            async with asyncio.timeout(timeout):
                await self._pieces.wait()
        except TimeoutError:
            pass
        self._pieces.clear()

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
