"""The chat websocket: /ws/chats/<chat id>/ for the chat's owner.

Inbound frames: {"type": "message.send", "content", "thread_id"?, "new_thread_title"?, "kind"?,
"client_id"?}, {"type": "message.edit", "message_id", "content"} and {"type": "run.cancel",
"run_id"}. Every outbound frame is an event from chats.events, or {"type": "error", "error": {...},
"client_id"?} for a bad frame.

Streams: on connect the socket first gets, for every reply still streaming, one message.delta at
offset 0 with the text so far (from the replay buffer), then the live tail (with Redis, from the
process's delta feed; embedded, with the other events). The socket remembers how far each stream
got: it trims overlapping deltas, and a delta that starts past that point (one was missed) comes
with the missing text from the replay buffer. So the client sees no gap and no repeat.

When Redis restarts, its group memberships are gone and a socket would hear nothing more: every
socket closes with CLOSE_RECONNECT (4503), and the page reconnects, catches up and gets the
snapshot of each reply still streaming.
"""

import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from redis.exceptions import RedisError

from chats import delivery, events, selectors, services
from chats.deltafeed import delta_feed
from chats.models import Message
from chats.streams import replay_buffer
from chats.temporary import chats as temporary_chats
from chats.temporary.images import ChatGone
from chats.temporary.scope import inside
from hub import input as hub_input
from hub import unavailable
from hub.errors import HubError, InvalidInput

log = logging.getLogger(__name__)

# The frames that need the database (a message sent, edited, a run cancelled), of every socket of
# this process, on a few threads of their own (HUB_FRAME_THREADS): a chat's frames always on the
# same thread, so they are stored in the order they came. Storing a message is mostly waiting on
# the database and Redis (about 8 round trips); each wait gives up the GIL, and winning it back from
# an event loop busy handing out deltas takes up to a switch interval. One thread did this for
# every chat, so a burst of a hundred messages was stored one after the other, the last ones
# seconds after they were sent; a few threads wait side by side. Each thread running the ORM next
# to the event loop also takes the GIL from it, which is why there are few (docs/decisions.md). The
# connect and the snapshot of a new tab run on Channels' own thread, not these. They keep the
# event loop's CPU priority: lowered (nice 19), one that held the GIL when the kernel put it off
# made the loop wait for it, which delayed both the loop's deltas and the stores
# (docs/decisions.md, "The threads that start and end turns...").
class FrameThreads:
    def __init__(self, count: int):
        self.executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"hub-socket-frames-{index}")
            for index in range(count)
        ]

    def for_chat(self, chat_id) -> ThreadPoolExecutor:
        return self.executors[hash(chat_id) % len(self.executors)]

    def run_on_each(self, fn) -> list:
        """fn's result on every thread, e.g. to close each one's database connection."""
        return [executor.submit(fn).result(timeout=10) for executor in self.executors]


FRAME_THREADS = FrameThreads(settings.HUB_FRAME_THREADS)

# Close codes (4000-4999 are the application's own).
CLOSE_NOT_FOUND = 4404
CLOSE_DELETED = 4410
# Redis restarted (every group membership is gone) or the socket lost it: events may have been
# missed, so the socket closes and the page reconnects and catches up, as on any code but the two
# above (static/js/net.js).
CLOSE_RECONNECT = 4503


class RefusedFrame:
    """A frame refused as it was decoded, with the client_id to answer it under (when clean)."""

    def __init__(self, error: InvalidInput, *, client_id=None):
        self.error = error
        self.client_id = client_id


def _echoable_client_id(frame):
    client_id = frame.get("client_id") if isinstance(frame, dict) else None
    if isinstance(client_id, str) and hub_input.text_problem(client_id) is None:
        return client_id
    return None


class HubConsumer(AsyncJsonWebsocketConsumer):
    """What both sockets share: the groups they joined, a bad frame answered, not fatal, and a
    lost Redis turned into a close the page reconnects on."""

    groups_joined: list[str] = []
    feed = None  # this process's delta feed, once accepted

    async def __call__(self, scope, receive, send):
        """As Channels runs a consumer, but a Redis that went away under it (the channel layer's
        receive, a group_add, a replay buffer read) closes the socket with CLOSE_RECONNECT
        instead of crashing it with a traceback and code 1011."""
        try:
            await super().__call__(scope, receive, send)
        except RedisError as exc:
            log.warning("a socket lost Redis (%r); it closes so that its page reconnects", exc)
            with contextlib.suppress(Exception):
                await self.redis_restarted()
            with contextlib.suppress(Exception):
                await self.disconnect(CLOSE_RECONNECT)

    async def redis_restarted(self) -> None:
        """Called by the delta feed too: what this socket was told may be incomplete."""
        await self.close(code=CLOSE_RECONNECT)

    async def join(self, *groups: str) -> None:
        self.groups_joined = list(groups)
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code):
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def dispatch(self, message):
        """As Channels dispatches, without closing old database connections first.

        Channels closes them before every message it hands a consumer, through the process's one
        thread for sync work: a hop there and back for each event a tab is sent. These handlers
        reach the database only through database_sync_to_async, which closes old connections in
        the thread that uses them.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Every frame is answered, none is fatal: a binary or empty frame, or JSON holding a
        refused text or number (hub.input), gets an error frame and the socket stays open."""
        if not text_data:
            await self.send_error(InvalidInput.for_field("frame", "must be a text frame holding a JSON object"))
            return
        frame = await self.decode_json(text_data)
        if isinstance(frame, RefusedFrame):
            await self.send_error(frame.error, frame.client_id)
            return
        await self.receive_json(frame, **kwargs)

    async def decode_json(self, text_data):
        """The frame parsed strictly; None for text that is not JSON (receive_json answers it), a
        RefusedFrame for JSON holding U+0000, a lone surrogate, NaN or an infinity."""
        try:
            frame = hub_input.parse_json(text_data)
        except ValueError:
            return None
        try:
            hub_input.check_json(frame, root="frame")
        except InvalidInput as exc:
            return RefusedFrame(exc, client_id=_echoable_client_id(frame))
        return frame

    async def send_error(self, exc: HubError, client_id=None) -> None:
        await self.send_json({"type": "error", **exc.as_dict(), "client_id": client_id})


class ChatConsumer(HubConsumer):
    chat = None
    temporary = False

    def on_chat(self, fn):
        """fn, run inside the chat's image when it is a temporary chat (chats.temporary)."""
        if not self.temporary:
            return fn
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]

        def run(*args, **kwargs):
            try:
                with inside(chat_id):
                    return fn(*args, **kwargs)
            except ChatGone:
                # Saved meanwhile (then it is stored now), or deleted or expired (not found).
                self.temporary = temporary_chats.exists(chat_id)
                if self.temporary:
                    raise
                return fn(*args, **kwargs)

        return run

    async def connect(self):
        user = self.scope.get("user")
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        try:
            self.temporary = await sync_to_async(temporary_chats.exists)(chat_id)
            self.chat = await database_sync_to_async(self.on_chat(selectors.chat_for_user))(user=user, chat_id=chat_id)
        except HubError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.chat.owner = user  # the owner, as the socket's user: sending needs no read of it
        await self.join(events.chat_group(self.chat.pk), events.user_group(user.pk))
        self.stream_offsets: dict[tuple[int, str], int] = {}
        await self.accept()
        self.feed = delta_feed()
        if self.feed is not None and not await self.feed.join(self.chat.pk, self):
            return  # Redis restarted while the socket joined: it was told to reconnect
        # Joined first, read second: anything streamed in between arrives twice and is trimmed.
        for event in await database_sync_to_async(self.on_chat(self._stream_snapshots))():
            await self.send_delta(event)

    def _stream_snapshots(self) -> list[dict]:
        snapshots = []
        streaming = Message.objects.filter(chat=self.chat, status=Message.Status.STREAMING).only("id", "run_id")
        for message in streaming:
            for part, text in replay_buffer().read(message.pk).items():
                if text:
                    snapshots.append(events.message_delta(message_id=message.pk, run_id=message.run_id or "",
                                                          offset=0, text=text, part=part))
        return snapshots

    async def send_delta(self, event: dict) -> None:
        key = (event["message_id"], event["part"])
        have = self.stream_offsets.get(key, 0)
        offset, text = event["offset"], event["text"]
        if offset > have:
            # A delta went missing: the replay buffer holds everything up to this one.
            buffered = await sync_to_async(replay_buffer().read)(event["message_id"])
            offset, text = have, buffered[event["part"]][have:]
            have = self.stream_offsets.get(key, 0)  # another event may have moved it meanwhile
        if offset < have:
            if offset + len(text) <= have:
                return  # already sent
            text, offset = text[have - offset:], have
        self.stream_offsets[key] = offset + len(text)
        if text:
            await self.send_json({**event, "offset": offset, "text": text})

    def _note_stored_text(self, event: dict) -> None:
        """The client now holds the message's stored text: deltas go on from its end.

        A settled message is the truth (finished, or handed to a new run that starts from it). A
        reply's message.created can come after its first deltas (they travel another way in Redis
        mode), so it never moves an offset back.
        """
        body = event["message"]
        stored = {"text": body["content"], "reasoning": (body.get("data") or {}).get("reasoning", "")}
        for part, text in stored.items():
            if event["type"] == events.MESSAGE_SETTLED:
                self.stream_offsets[(body["id"], part)] = len(text)
            else:
                self.stream_offsets.setdefault((body["id"], part), len(text))

    async def disconnect(self, code):
        if self.feed is not None:
            await self.feed.leave(self.chat.pk, self)
        await super().disconnect(code)

    async def receive_json(self, content, **kwargs):
        client_id = content.get("client_id") if isinstance(content, dict) else None
        try:
            if not isinstance(content, dict):
                raise InvalidInput.for_field("frame", "must be a JSON object")
            frame_type = content.get("type")
            handler = self.inbound.get(frame_type) if isinstance(frame_type, str) else None
            if handler is None:
                raise InvalidInput.for_field("type", f"unknown frame type {str(frame_type)[:100]!r}")
            await database_sync_to_async(self.on_chat(handler), thread_sensitive=False,
                                         executor=FRAME_THREADS.for_chat(self.chat.pk))(self, content)
        except HubError as exc:
            await self.send_error(exc, client_id)
        except Exception as exc:
            # The database or Redis not answering gets an error frame; the socket stays open. A
            # message stored before the broker failed is not named (no client_id): the page must
            # not mark it failed and offer to send it twice; it confirms it when it catches up.
            outage = unavailable.as_hub_error(exc)
            if outage is None:
                raise
            await self.send_error(outage, None if outage.outage.stored else client_id)

    def _send_message(self, frame: dict) -> None:
        # The chat read on connect, not read again: its owner cannot change, and send_message
        # checks under the chat's row lock that it was not deleted since.
        thread_id = frame.get("thread_id")
        thread = selectors.thread_for_chat(chat=self.chat, thread_id=thread_id) if thread_id is not None else None
        services.send_message(
            chat=self.chat,
            content=frame.get("content"),
            thread=thread,
            new_thread_title=frame.get("new_thread_title"),
            kind=frame.get("kind") or "message",
            client_id=frame.get("client_id"),
            files=frame.get("files") or None,
        )

    def _edit_message(self, frame: dict) -> None:
        chat = selectors.chat_for_user(user=self.scope["user"], chat_id=self.chat.pk)
        message = selectors.message_for_chat(chat=chat, message_id=frame.get("message_id"))
        services.edit_message(message=message, content=frame.get("content"))

    def _cancel_run(self, frame: dict) -> None:
        chat = selectors.chat_for_user(user=self.scope["user"], chat_id=self.chat.pk)
        delivery.cancel_run(user=self.scope["user"], chat=chat, run_id=frame.get("run_id"))

    inbound = {"message.send": _send_message, "message.edit": _edit_message, "run.cancel": _cancel_run}

    async def hub_event(self, message):
        for event in message["events"]:
            if event.get("type") == events.MESSAGE_DELTA:
                await self.send_delta(event)
                continue
            if event.get("type") in (events.MESSAGE_SETTLED, events.MESSAGE_CREATED):
                self._note_stored_text(event)
            if event.get("type") == events.CHAT_SAVED:
                self.temporary = False  # the same chat, in the database from now on
            await self.send_json(event)
            if event.get("type") == events.CHAT_DELETED and event.get("chat_id") == str(self.chat.pk):
                await self.close(code=CLOSE_DELETED)
                return


class DirectoryConsumer(HubConsumer):
    """/ws/directory/: the user's own events (directory, memory) for a page with no chat open.

    A chat's socket already carries these; this one serves the page between chats. It accepts no
    frames.
    """

    async def connect(self):
        user = self.scope.get("user")
        if not getattr(user, "is_authenticated", False):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.join(events.user_group(user.pk))
        await self.accept()
        self.feed = delta_feed()
        if self.feed is not None:
            await self.feed.watch(self)

    async def disconnect(self, code):
        if self.feed is not None:
            await self.feed.unwatch(self)
        await super().disconnect(code)

    async def receive_json(self, content, **kwargs):
        client_id = content.get("client_id") if isinstance(content, dict) else None
        await self.send_error(InvalidInput.for_field("type", "this socket takes no frames"), client_id)

    async def hub_event(self, message):
        for event in message["events"]:
            await self.send_json(event)
