"""The live deltas of streaming replies, for the chat sockets of one web process.

A web process's feed has an id and a channel of its own, and registers in Redis each chat it has
a tab for (the chat's watch key, with a lease it renews while the tab stays; chats.streams). A
worker's tick sends each registered process one message with its chats' deltas, so a process
hears only the chats it shows, and a process that died stops being sent anything when its lease
ends. A tab's join returns once its chat is registered: every delta published after that comes
here, and everything before it is in the replay buffer the tab reads next. A delta can still be
missed (while the connection was down): the consumer sees the offset jump and fills the gap from
the replay buffer, so a tab never shows a hole.

The feed's connection is also how a web process notices that Redis restarted: every socket that
watches the feed is then told, and closes so that its page reconnects (see _subscribe).

Embedded, MemoryDeltaFeed does the same within the process: the replay buffer hands it each
batch from the worker's model loop, and it hands the deltas to its loop's tabs. Neither makes a
worker wait for a tab.

One feed per event loop: Daphne has one; the test client makes one per test.
"""

import asyncio
import collections
import contextvars
import json
import logging
import uuid
import weakref

from django.conf import settings
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from chats.streams import WATCH_SCRIPT, delta_channel, replay_buffer, watch_key

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.5
CLIENT_NAME = "hub-delta-feed"  # what CLIENT LIST shows for this connection
LEASE_SECONDS = 60  # a process that stops renewing (it died) is sent no deltas after this
RENEW_SECONDS = 20
KEYS_PER_CALL = 500


class DeltaFeed:
    def __init__(self, config):
        # No socket timeout: a tab may sit quietly for hours, and with one redis-py would send
        # through asyncio.wait_for, which swallows cancellation on Python 3.11 (see settings).
        # No retries either: redis-py would reconnect and subscribe again unseen, and the feed
        # could not tell a Redis that restarted (see _subscribe) from one that dropped a socket.
        self.client = config.async_client(socket_timeout=None, socket_keepalive=True,
                                          client_name=CLIENT_NAME, retry=Retry(NoBackoff(), 0))
        self.pubsub = None
        self.tabs: dict[str, set] = {}  # chat id → its open tabs in this process
        self.sockets: set = set()  # every socket of this process that must hear of a restart
        self.listening = asyncio.Event()  # subscribed to the Redis that self.server_id names
        self.server_id: str | None = None  # the run_id of the Redis server, new at each restart
        self.generation = 0  # how many restarts (or moments that may have been one) the feed saw
        self.reader: asyncio.Task | None = None
        self.failures = 0
        self.feed_id = uuid.uuid4().hex[:16]
        self.watch_script = self.client.register_script(WATCH_SCRIPT)
        self.registered: set[str] = set()  # chats whose watch key holds this process
        self.register_all = False  # the next round registers every chat again (renews the leases)
        self.waiting: list[asyncio.Future] = []  # joins and leaves for the registrar's next round
        self.registrar: asyncio.Task | None = None
        self.renewer: asyncio.Task | None = None

    async def watch(self, socket) -> bool:
        """Await socket.redis_restarted() if the Redis this process talks to restarts. False if
        that happened already while the socket waited for the feed (it has been told)."""
        if self.reader is None or self.reader.done():
            loop = asyncio.get_running_loop()
            self.reader = loop.create_task(self._read(), name="hub-delta-feed")
            self.renewer = loop.create_task(self._renew(), name="hub-delta-leases")
        generation = self.generation
        await self.listening.wait()
        if self.generation != generation:
            await socket.redis_restarted()
            return False
        self.sockets.add(socket)
        return True

    async def join(self, chat_id, tab) -> bool:
        """Hand tab (a consumer with send_delta) every delta of the chat from now on; False as
        watch() says."""
        if not await self.watch(tab):
            return False
        self.tabs.setdefault(str(chat_id), set()).add(tab)
        if str(chat_id) not in self.registered:
            await self._register_changes()
        return True

    async def leave(self, chat_id, tab) -> None:
        self.sockets.discard(tab)
        tabs = self.tabs.get(str(chat_id))
        if tabs is not None:
            tabs.discard(tab)
            if not tabs:
                del self.tabs[str(chat_id)]
                await self._register_changes()

    async def unwatch(self, socket) -> None:
        self.sockets.discard(socket)

    def _register_changes(self) -> asyncio.Future:
        """Until Redis knows the chats this process has tabs for now. One task does it, in rounds:
        the joins and leaves of a burst share a round, and the last round sees the last state."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.waiting.append(done)
        if self.registrar is None or self.registrar.done():
            self.registrar = loop.create_task(self._register_rounds(), name="hub-delta-registrar")
        return done

    async def _register_rounds(self) -> None:
        while self.waiting:
            waiting, self.waiting = self.waiting, []
            wanted = set(self.tabs)
            # Taken at the round's start: a renewal asked for while a round is in flight is the
            # next round's, never lost to the one in flight (a busy process always has one).
            known, self.register_all = (set() if self.register_all else self.registered), False
            try:
                await self._register(wanted - known)
                await self._unregister(self.registered - wanted)
                self.registered = wanted
            except Exception:
                # The next round (a tab's join or leave, or the renewal) registers them all: until
                # then a tab fills its deltas from the replay buffer when the next one arrives.
                self.register_all = True
                log.warning("could not register this process's chats for their deltas", exc_info=True)
            for future in waiting:
                if not future.done():
                    future.set_result(None)

    async def _register(self, chat_ids) -> None:
        chat_ids = list(chat_ids)
        for start in range(0, len(chat_ids), KEYS_PER_CALL):
            keys = [watch_key(chat_id) for chat_id in chat_ids[start:start + KEYS_PER_CALL]]
            await self.watch_script(keys=keys, args=[self.feed_id, LEASE_SECONDS])

    async def _unregister(self, chat_ids) -> None:
        if chat_ids:
            async with self.client.pipeline(transaction=False) as pipe:
                for chat_id in chat_ids:
                    pipe.zrem(watch_key(chat_id), self.feed_id)
                await pipe.execute()

    async def _renew(self) -> None:
        """Renew the leases of every chat this process shows, while it lives."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            self.register_all = True  # Redis may have lost some too
            await self._register_changes()

    async def _read(self) -> None:
        while True:
            try:
                if not self.listening.is_set():
                    await self._subscribe()
                message = await self.pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except Exception:
                self._lost()
                # A dropped socket is taken again at once; a Redis that is down, twice a second.
                await asyncio.sleep(RETRY_SECONDS if self.failures > 1 else 0)
                continue
            if message is None or message["type"] != "message":
                continue
            for chat_id, delta in json.loads(message["data"]):
                if chat_id in self.tabs:  # a tab may have left since Redis routed it here
                    await self._hand_out(chat_id, delta)

    def _lost(self) -> None:
        self.failures += 1
        if self.failures == 1:
            log.warning("the delta feed lost Redis; subscribing again", exc_info=True)
        self.listening.clear()

    async def _subscribe(self) -> None:
        """Subscribe on a fresh connection, then see whether Redis restarted meanwhile.

        A restart loses every group membership of the channel layer: this process's sockets would
        stay open but hear no event again. Each is told (it closes, and the page reconnects and
        catches up); a socket that only lost its deltas for a moment fills them from the buffer.
        """
        if self.pubsub is not None:
            try:
                await self.pubsub.aclose()
            except Exception:
                pass  # the old connection is already gone
        self.pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        await self.pubsub.subscribe(delta_channel(self.feed_id))
        server_id = (await self.client.info("server"))["run_id"]
        # A first subscription that only took after a failure cannot tell: the sockets waiting
        # for it joined their groups before, perhaps on the Redis that went away.
        if server_id != self.server_id and (self.server_id is not None or self.failures):
            self.generation += 1
            await self._tell_sockets_redis_restarted()
        if self.failures:
            log.warning("the delta feed is subscribed again")
            self.register_all = True  # Redis may have lost them, or the leases ended meanwhile
            self._register_changes()
        self.server_id, self.failures = server_id, 0
        self.listening.set()

    async def _tell_sockets_redis_restarted(self) -> None:
        sockets, self.sockets, self.tabs, self.registered = list(self.sockets), set(), {}, set()
        if sockets:
            log.warning("Redis restarted: %d socket(s) of this process told to reconnect", len(sockets))
        for socket in sockets:
            try:
                await socket.redis_restarted()
            except Exception:
                log.warning("could not tell a socket that Redis restarted", exc_info=True)

    async def _hand_out(self, chat_id: str, delta: dict) -> None:
        for tab in list(self.tabs.get(chat_id, ())):
            try:
                await tab.send_delta(delta)
            except Exception:
                # One tab's failure (a socket closing as we send) is no reason to starve the rest.
                log.warning("could not pass a delta to a tab", exc_info=True)


class MemoryDeltaFeed:
    """Embedded mode's feed: the in-process replay buffer publishes to it from the model loop's
    thread; the deltas are handed to this loop's tabs on the loop. Nothing here restarts."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.tabs: dict[str, set] = {}
        self.queue: collections.deque = collections.deque()  # (chat id, delta), in the order sent
        self.sender: asyncio.Task | None = None
        replay_buffer().feeds.add(self)

    async def watch(self, socket) -> bool:
        return True

    async def join(self, chat_id, tab) -> bool:
        self.tabs.setdefault(str(chat_id), set()).add(tab)
        return True

    async def leave(self, chat_id, tab) -> None:
        tabs = self.tabs.get(str(chat_id))
        if tabs is not None:
            tabs.discard(tab)
            if not tabs:
                del self.tabs[str(chat_id)]

    async def unwatch(self, socket) -> None:
        pass

    def publish(self, batch: list[tuple[str, dict]]) -> None:
        """From any thread: [(chat id, delta), ...]; returns at once."""
        try:
            # In a context of its own: the sender's (a sync_to_async thread's, a turn's) must not
            # follow the deltas onto the loop, where asgiref would take it for its own thread.
            self.loop.call_soon_threadsafe(self._hand_out_batch, batch, context=contextvars.Context())
        except RuntimeError:
            replay_buffer().feeds.discard(self)  # the loop has closed

    def _hand_out_batch(self, batch: list[tuple[str, dict]]) -> None:
        self.queue.extend((chat_id, delta) for chat_id, delta in batch if chat_id in self.tabs)
        if self.queue and (self.sender is None or self.sender.done()):
            self.sender = self.loop.create_task(self._send_queued())

    async def _send_queued(self) -> None:
        """One task sends them all, so each tab gets its deltas in order."""
        while self.queue:
            chat_id, delta = self.queue.popleft()
            for tab in list(self.tabs.get(chat_id, ())):
                try:
                    await tab.send_delta(delta)
                except Exception:
                    log.warning("could not pass a delta to a tab", exc_info=True)


_feeds: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DeltaFeed | MemoryDeltaFeed]" = (
    weakref.WeakKeyDictionary())


def delta_feed() -> DeltaFeed | MemoryDeltaFeed:
    """This event loop's feed: from Redis's delta channel, or, embedded, from the in-process buffer."""
    loop = asyncio.get_running_loop()
    feed = _feeds.get(loop)
    if feed is None:
        feed = _feeds[loop] = DeltaFeed(settings.HUB_REDIS) if settings.HUB_REDIS else MemoryDeltaFeed(loop)
    return feed
