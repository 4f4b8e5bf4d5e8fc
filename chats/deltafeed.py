"""The live deltas of streaming replies, for the chat sockets of one web process (Redis mode).

Workers publish their deltas in batches on the delta channel (chats.streams). A web process holds
one Redis subscription to it and hands every delta to the tabs that show its chat; deltas of
chats it has no tab for are dropped. A delta can still be missed (published before the
subscription took, or while the connection was down and redis-py reconnected it): the consumer
sees the offset jump and fills the gap from the replay buffer, so a tab never shows a hole.

One feed per event loop: Daphne has one; the test client makes one per test.
"""

import asyncio
import json
import logging
import weakref

import redis.asyncio
from django.conf import settings

from chats.streams import delta_channel

log = logging.getLogger(__name__)
RETRY_SECONDS = 1.0
CLIENT_NAME = "hub-delta-feed"  # what CLIENT LIST shows for this connection


class DeltaFeed:
    def __init__(self, url: str):
        # No socket timeout: a tab may sit quietly for hours, and with one redis-py would send
        # through asyncio.wait_for, which swallows cancellation on Python 3.11 (see settings).
        client = redis.asyncio.Redis.from_url(url, socket_timeout=None, socket_keepalive=True,
                                              client_name=CLIENT_NAME)
        self.pubsub = client.pubsub(ignore_subscribe_messages=True)
        self.tabs: dict[str, set] = {}  # chat id → its open tabs in this process
        self.listening = asyncio.Event()  # subscribed (redis-py subscribes again on a reconnect)
        self.reader: asyncio.Task | None = None

    async def join(self, chat_id, tab) -> None:
        """Hand tab (a consumer with send_delta) every delta of the chat from now on."""
        self.tabs.setdefault(str(chat_id), set()).add(tab)
        if self.reader is None or self.reader.done():
            self.reader = asyncio.get_running_loop().create_task(self._read(), name="hub-delta-feed")
        await self.listening.wait()

    async def leave(self, chat_id, tab) -> None:
        tabs = self.tabs.get(str(chat_id))
        if tabs is not None:
            tabs.discard(tab)
            if not tabs:
                del self.tabs[str(chat_id)]

    async def _read(self) -> None:
        while True:
            try:
                if not self.listening.is_set():
                    await self.pubsub.subscribe(delta_channel())
                    self.listening.set()
                message = await self.pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("the delta feed lost Redis; trying again", exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            if message is None or message["type"] != "message":
                continue
            for chat_id, delta in json.loads(message["data"]):
                if chat_id in self.tabs:
                    await self._hand_out(chat_id, delta)

    async def _hand_out(self, chat_id: str, delta: dict) -> None:
        for tab in list(self.tabs.get(chat_id, ())):
            try:
                await tab.send_delta(delta)
            except Exception:
                # One tab's failure (a socket closing as we send) is no reason to starve the rest.
                log.warning("could not pass a delta to a tab", exc_info=True)


_feeds: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DeltaFeed]" = weakref.WeakKeyDictionary()


def delta_feed() -> DeltaFeed | None:
    """This event loop's feed; None in embedded mode, where deltas come with the other events."""
    if not settings.REDIS_URL:
        return None
    loop = asyncio.get_running_loop()
    feed = _feeds.get(loop)
    if feed is None:
        feed = _feeds[loop] = DeltaFeed(settings.REDIS_URL)
    return feed
