"""The chat socket's frames that need the database (a message sent or edited, a run cancelled),
and where they run.

With Redis they run in a process of their own beside the web process, one frame at a time. In
the web process they shared its GIL with the event loop that hands out live deltas: each send to
a socket gives the GIL up and must win it back from the thread storing a message, up to 5 ms a
time, and Linux cannot put one thread of a process ahead of another that holds the GIL. A burst
of a hundred messages then paused every stream already running for 80 to 100 ms (the streaming
benchmark's worst deltas; docs/decisions.md). A process of its own has its own GIL, and runs at
the background priority (HUB_BACKGROUND_NICE), which the kernel does honour against the loop.

Embedded mode keeps them on a thread: its channel layer lives in the web process, so another
process's events would reach no socket. HUB_FRAME_PROCESS=0 does the same with Redis.
"""

import asyncio
import logging
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from django.conf import settings
from django.db import close_old_connections

from chats import delivery, selectors, services
from hub.errors import HubError
from hub.startup import start_frame_process, yield_to_streams

log = logging.getLogger(__name__)


class FrameLost(HubError):
    """The frame's process died while it ran: whether the frame took effect is unknown."""

    code = "unavailable"
    status = 503


# --- The frames ---------------------------------------------------------------------------------

def send_message(chat, frame: dict) -> None:
    # The chat read on connect, not read again: its owner cannot change, and send_message
    # checks under the chat's row lock that it was not deleted since.
    thread_id = frame.get("thread_id")
    thread = selectors.thread_for_chat(chat=chat, thread_id=thread_id) if thread_id is not None else None
    services.send_message(
        chat=chat,
        content=frame.get("content"),
        thread=thread,
        new_thread_title=frame.get("new_thread_title"),
        kind=frame.get("kind") or "message",
        client_id=frame.get("client_id"),
    )


def edit_message(chat, frame: dict) -> None:
    chat = selectors.chat_for_user(user=chat.owner, chat_id=chat.pk)
    message = selectors.message_for_chat(chat=chat, message_id=frame.get("message_id"))
    services.edit_message(message=message, content=frame.get("content"))


def cancel_run(chat, frame: dict) -> None:
    chat = selectors.chat_for_user(user=chat.owner, chat_id=chat.pk)
    delivery.cancel_run(user=chat.owner, chat=chat, run_id=frame.get("run_id"))


HANDLERS = {"message.send": send_message, "message.edit": edit_message, "run.cancel": cancel_run}


def handle(frame_type: str, chat, frame: dict) -> None:
    """Run one frame, with the connection housekeeping Django does around a request."""
    close_old_connections()
    try:
        HANDLERS[frame_type](chat, frame)
    finally:
        close_old_connections()


# --- Where they run -----------------------------------------------------------------------------

class FrameRunner:
    """One frame at a time, in order: on a process of its own (Redis), else on a thread."""

    def __init__(self):
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-socket-frames",
                                         initializer=yield_to_streams)
        self.process: ProcessPoolExecutor | None = None

    def in_process(self) -> bool:
        return settings.HUB_FRAME_PROCESS and not settings.EMBEDDED

    def executor(self) -> Executor:
        if not self.in_process():
            return self.thread
        if self.process is None:
            # spawn, not fork: the web process already runs threads and an event loop.
            self.process = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=start_frame_process)
        return self.process

    def warm(self) -> None:
        """Start the frame process now, so the first message sent does not wait for Django's setup."""
        if self.in_process() and self.process is None:
            self.executor().submit(int)

    async def run(self, frame_type: str, chat, frame: dict) -> None:
        executor, future = self.submit(frame_type, chat, frame)
        try:
            await asyncio.wrap_future(future)
        except BrokenProcessPool:
            # It died with this frame handed to it: whether the frame took effect is unknown.
            self.replace(executor)
            raise FrameLost("the server lost this request; check whether it took effect and try again") from None

    def submit(self, frame_type: str, chat, frame: dict):
        """Hand the frame on; a process found dead before it was handed this one is replaced first."""
        executor = self.executor()
        try:
            return executor, executor.submit(handle, frame_type, chat, frame)
        except BrokenProcessPool:
            self.replace(executor)
            executor = self.executor()
            return executor, executor.submit(handle, frame_type, chat, frame)

    def replace(self, broken: Executor) -> None:
        """The next frame starts a new process (once, however many frames the dead one failed)."""
        if self.process is broken:
            log.error("the socket frame process died; the next frame starts another")
            self.process = None


runner = FrameRunner()
