"""The scripted test model keeps its pace by the clock, as a model server does."""

import asyncio
import time

from agents_app.scripted import Pace


def stream_for(pieces: int, delay: float, *, stall_after: int | None = None) -> float:
    """Seconds a stream of pieces takes; the loop is held up for 0.3 s after piece stall_after."""

    async def stream():
        pace, began = Pace(delay), time.monotonic()
        for index in range(pieces):
            await pace.wait()
            if index == stall_after:
                time.sleep(0.3)  # the event loop is busy with something else
        return time.monotonic() - began

    return asyncio.run(stream())


def test_pieces_come_at_the_pace_asked():
    assert stream_for(20, 0.01) >= 0.19


def test_a_late_wake_up_does_not_slow_the_stream_down():
    """The pieces that fell due while the loop was held up follow at once: the stream ends on
    time, so a benchmark on a busy machine still asks for the rate it says."""
    # A fixed sleep after each piece would take 20 × 10 ms + 300 ms = 0.5 s.
    assert stream_for(20, 0.01, stall_after=2) < 0.45
