"""A Redis that restarts (empty: no persistence) under the replay buffer and the chat sockets.

Each test runs on a redis-server of its own (tests.chaos.redis_server), SIGKILLed and started
again; the channel layer, the delta feed and the replay buffer of this process point at it.
"""

import asyncio
import json
import time

import pytest
import redis
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from chats import events, services, streams
from chats.deltafeed import delta_feed
from chats.routing import websocket_urlpatterns
from hub.redis_config import RedisConfig
from tests.chaos.redis_server import RedisServer

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]

CLOSE_RECONNECT = 4503


@pytest.fixture
def private_redis(tmp_path, settings, monkeypatch):
    """This process's Redis users (layer, feed, replay buffer) on a redis-server of the test's own."""
    server = RedisServer(tmp_path).start()
    settings.REDIS_URL = server.url()
    settings.HUB_REDIS = RedisConfig(server.url())
    layer = settings.CHANNEL_LAYERS["default"]
    settings.CHANNEL_LAYERS = {"default": {**layer, "CONFIG": {
        **layer["CONFIG"], "hosts": [{**layer["CONFIG"]["hosts"][0], "address": server.url()}]}}}
    monkeypatch.setattr(streams, "_buffer", None)  # made again from the settings on first use
    yield server
    server.stop()


def delta(message_id, offset, text):
    return events.message_delta(message_id=message_id, run_id="r", offset=offset, text=text)


def test_a_buffer_redis_lost_is_written_whole_before_the_next_deltas_are_published(private_redis):
    buffer = streams.replay_buffer()
    buffer.reset(7, {"text": "Hello"})
    buffer.stream_many([(7, "chat", {"text": ", wor"}, [delta(7, 5, ", wor")])])
    assert buffer.read(7)["text"] == "Hello, wor"

    private_redis.sigkill()
    started = time.monotonic()
    buffer.stream_many([(7, "chat", {"text": "ld"}, [delta(7, 10, "ld")])])  # while Redis is away
    assert time.monotonic() - started < 5, "a send to a Redis that is down must not hold the stream up"
    private_redis.start()  # empty

    # A web process that shows the chat: registered for its deltas, listening on its channel.
    redis.Redis.from_url(private_redis.url()).zadd(streams.watch_key("chat"), {"listener": time.time() * 1000 + 60_000})
    listener = redis.Redis.from_url(private_redis.url()).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(streams.delta_channel("listener"))
    buffer.stream_many([(7, "chat", {"text": "!"}, [delta(7, 12, "!")])])
    message = None
    deadline = time.monotonic() + 5
    while message is None and time.monotonic() < deadline:
        message = listener.get_message(timeout=1)  # None for the subscription's own reply
    # What a tab that missed deltas reads when it hears this one: the whole text, no hole.
    assert json.loads(message["data"]) == [["chat", delta(7, 12, "!")]]
    assert buffer.read(7)["text"] == "Hello, world!"
    assert 0 < redis.Redis.from_url(private_redis.url()).ttl(streams._key(7, "text")) <= streams.TTL_SECONDS
    listener.close()


def test_a_buffer_that_lost_a_send_is_repaired_without_a_restart(private_redis):
    buffer = streams.replay_buffer()
    buffer.reset(8, {"text": "abc"})
    redis.Redis.from_url(private_redis.url()).set(streams._key(8, "text"), "ab")  # an append that never landed
    buffer.stream_many([(8, "chat", {"text": "d"}, [delta(8, 3, "d")])])
    assert buffer.read(8)["text"] == "abcd"


async def open_socket(path, user):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


async def closed_with(communicator, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        output = await communicator.receive_output(timeout=max(0.1, deadline - time.monotonic()))
        if output["type"] == "websocket.close":
            return output.get("code")


async def test_every_socket_is_told_to_reconnect_when_redis_restarts_and_a_new_one_hears_events(
        private_redis, user):
    chat = await database_sync_to_async(services.create_chat)(owner=user, title="Through a restart")
    chat_tab = await open_socket(f"/ws/chats/{chat.pk}/", user)
    directory = await open_socket("/ws/directory/", user)
    feed = delta_feed()
    while len(feed.sockets) < 2:  # both have joined the feed (it hears of restarts)
        await asyncio.sleep(0.01)

    await asyncio.to_thread(private_redis.restart_after, 0.5)
    # Their group memberships went with Redis: both close with the code the page reconnects on.
    assert await closed_with(chat_tab) == CLOSE_RECONNECT
    assert await closed_with(directory) == CLOSE_RECONNECT

    # The page reconnects: its group_add and the first broadcast after the restart both work.
    again = await open_socket(f"/ws/chats/{chat.pk}/", user)
    await again.send_json_to({"type": "message.send", "content": "still here", "client_id": "c-1"})
    while (event := await again.receive_json_from(timeout=10))["type"] != "message.created":
        pass
    assert event["message"]["content"] == "still here" and event["client_id"] == "c-1"
    await again.disconnect()
