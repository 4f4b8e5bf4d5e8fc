"""Deltas go only to the web processes that show their chat (chats.streams, chats.deltafeed).

Each web process registers the chats it has tabs for under a lease; the worker's one command per
tick sends each registered process one message with its chats' deltas. Stand-in processes here
are plain redis-py subscribers registered the way a feed registers; real tabs are the chat socket
through channels' WebsocketCommunicator, on the Redis that CI runs.
"""

import asyncio
import functools
import json
import threading
import time

import pytest
import redis
from channels.db import database_sync_to_async
from django.conf import settings

from chats import events, services, streams
from chats.deltafeed import LEASE_SECONDS, delta_feed
from tests.chats.test_consumers import open_socket

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]


def server():
    return _client(settings.REDIS_URL)


@functools.cache
def _client(url):
    # Kept for the module's life: a client that is collected closes its pool, subscriptions and all.
    return redis.Redis.from_url(url)


def stand_in_process(feed_id, *chat_ids, lease=LEASE_SECONDS):
    """A web process that shows these chats: registered as a feed registers, listening on its channel."""
    client = server()
    client.register_script(streams.WATCH_SCRIPT)(keys=[streams.watch_key(c) for c in chat_ids],
                                                 args=[feed_id, lease])
    listener = client.pubsub()
    listener.subscribe(streams.delta_channel(feed_id))
    assert listener.get_message(timeout=5)["type"] == "subscribe"  # the server has taken it
    return listener


def messages(listener, wait=0.5):
    """Every message the process was sent, as [[chat id, delta], ...] each."""
    heard, deadline = [], time.monotonic() + wait
    while time.monotonic() < deadline:
        message = listener.get_message(timeout=0.05)
        if message is not None and message["type"] == "message":
            heard.append(json.loads(message["data"]))
    return heard


def delta(message_id, offset, text):
    return events.message_delta(message_id=message_id, run_id="r", offset=offset, text=text)


def test_each_process_is_sent_only_its_chats_deltas_in_one_message_per_tick():
    first = stand_in_process("web-one", "chat-a")
    second = stand_in_process("web-two", "chat-b", "chat-a")
    quiet = stand_in_process("web-three", "chat-c")
    buffer = streams.replay_buffer()
    for message_id in (101, 102, 103):
        buffer.reset(message_id, {})

    buffer.stream_many([
        (101, "chat-a", {"text": "Hello"}, [delta(101, 0, "Hel"), delta(101, 3, "lo")]),
        (102, "chat-b", {"text": "Hi"}, [delta(102, 0, "Hi")]),
        (103, "chat-d", {"text": "nobody watches"}, [delta(103, 0, "nobody watches")]),
    ])

    assert messages(first) == [[["chat-a", delta(101, 0, "Hel")], ["chat-a", delta(101, 3, "lo")]]]
    assert messages(second) == [[["chat-a", delta(101, 0, "Hel")], ["chat-a", delta(101, 3, "lo")],
                                 ["chat-b", delta(102, 0, "Hi")]]]
    assert messages(quiet) == []
    assert buffer.read(103)["text"] == "nobody watches"  # stored for whoever opens it later
    for listener in (first, second, quiet):
        listener.close()


def test_a_process_whose_lease_ended_is_sent_nothing():
    """A web process that died stops renewing: its chats' deltas stop going to its channel."""
    dead = stand_in_process("web-dead", "chat-e", lease=1)
    time.sleep(1.1)
    streams.replay_buffer().reset(104, {})
    streams.replay_buffer().stream_many([(104, "chat-e", {"text": "x"}, [delta(104, 0, "x")])])
    assert messages(dead) == []
    assert server().exists(streams.watch_key("chat-e")) == 0  # the key went with its last lease
    dead.close()


async def test_a_thousand_tabs_opened_and_closed_leave_no_registration_and_one_subscription(user):
    """One subscription per web process whatever its tabs; a chat's registration goes with its last tab."""
    chats = [await database_sync_to_async(services.create_chat)(owner=user, title=f"Tabs {n}") for n in range(100)]
    client = server()
    tabs = []
    for group in range(10):  # a hundred tabs at a time, ten on each chat
        # As they close below: a hundred connecting at once on a busy machine may take over 5 s.
        opened = await asyncio.gather(*(open_socket(user, chat.pk, timeout=30) for chat in chats))
        assert all(ok for _, ok, _ in opened), f"a tab of group {group} was refused"
        tabs += [tab for tab, _, _ in opened]
    feed = delta_feed()
    await until(lambda: all(client.zcard(streams.watch_key(chat.pk)) for chat in chats), "every chat registered")
    assert {member.decode() for chat in chats for member in client.zrange(streams.watch_key(chat.pk), 0, -1)} == {
        feed.feed_id}
    assert client.pubsub_numsub(streams.delta_channel(feed.feed_id))[0][1] == 1

    # A communicator cancels its consumer if it has not closed within the timeout (1 s by default):
    # a thousand closing at once on a busy machine may take longer, and a cancelled one never
    # leaves its chat, which Daphne never does to a closing socket.
    await asyncio.gather(*(tab.disconnect(timeout=30) for tab in tabs))
    await until(lambda: not any(client.exists(streams.watch_key(chat.pk)) for chat in chats),
                "every registration gone")
    assert feed.registered == set() and feed.tabs == {}
    assert client.pubsub_numsub(streams.delta_channel(feed.feed_id))[0][1] == 1  # still one, never more


async def until(check, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_a_tab_that_joins_mid_stream_shows_the_exact_text_with_no_gap_or_repeat(user):
    chat = await database_sync_to_async(services.create_chat)(owner=user, title="Mid-stream")
    reply = await database_sync_to_async(services.send_message)(chat=chat, content="", status="streaming",
                                                                kind="message")
    buffer = streams.replay_buffer()
    buffer.reset(reply.pk, {})
    words = [f"w{n} " for n in range(300)]
    started, finished = threading.Event(), threading.Event()

    def worker():  # a reply streaming a word a tick, as the model loop sends it
        offset = 0
        for n, word in enumerate(words):
            buffer.stream_many([(reply.pk, chat.pk, {"text": word}, [delta(reply.pk, offset, word)])])
            offset += len(word)
            if n == 30:
                started.set()
            time.sleep(0.002)
        finished.set()

    thread = threading.Thread(target=worker)
    thread.start()
    await asyncio.to_thread(started.wait)
    tab, ok, _ = await open_socket(user, chat.pk)
    assert ok
    shown, whole = "", "".join(words)
    while len(shown) < len(whole):
        event = await tab.receive_json_from(timeout=10)
        if event["type"] == "message.delta":
            assert event["offset"] == len(shown), "a gap or a repeat"
            shown += event["text"]
    assert shown == whole
    await asyncio.to_thread(thread.join)
    await tab.disconnect()


class Tab:
    """What the feed needs of a chat socket: it collects the deltas handed to it."""

    def __init__(self):
        self.deltas: asyncio.Queue = asyncio.Queue()

    async def send_delta(self, delta):
        await self.deltas.put(delta)

    async def redis_restarted(self):
        pass


async def test_leases_are_renewed_while_tabs_come_and_go_all_the_time(monkeypatch):
    """A busy web process nearly always has a registration round in flight; the renewal must not be
    lost to it, or a tab open longer than the lease would stop hearing its chat."""
    from chats import deltafeed

    monkeypatch.setattr(deltafeed, "LEASE_SECONDS", 2)
    monkeypatch.setattr(deltafeed, "RENEW_SECONDS", 0.5)
    feed = deltafeed.DeltaFeed(settings.HUB_REDIS)
    steady, churning = Tab(), Tab()
    try:
        assert await feed.join("steady-chat", steady)
        deadline, n = time.monotonic() + 2 * deltafeed.LEASE_SECONDS, 0
        while time.monotonic() < deadline:  # other tabs open and close all the while
            await feed.join(f"churn-{n}", churning)
            await feed.leave(f"churn-{n}", churning)
            n += 1
        buffer = streams.replay_buffer()
        buffer.reset(105, {})
        await asyncio.to_thread(buffer.stream_many, [(105, "steady-chat", {"text": "still"}, [delta(105, 0, "still")])])
        assert await asyncio.wait_for(steady.deltas.get(), 5) == delta(105, 0, "still")
    finally:
        for task in (feed.reader, feed.renewer, feed.registrar):
            if task is not None:
                task.cancel()
        await feed.client.aclose()
