"""A run's event stream while Redis is away: keepalives, then the rest; or, if Redis stays away,
an `error` event, and a resume with Last-Event-ID that misses nothing and repeats nothing.

The stream (agents_app.api.events.stream_runs) reads a replay buffer on a redis-server of the
test's own, SIGKILLed and started again (empty) while a reply streams.
"""

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import connections

from agents_app.api import events as run_events
from agents_app.models import Run
from agents_app.turns import runs
from chats import events, streams
from chats import services as chat_services
from hub.api.sse import KEEPALIVE
from hub.redis_config import RedisConfig
from tests.chaos.redis_server import RedisServer

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def private_redis(tmp_path, settings, monkeypatch):
    server = RedisServer(tmp_path).start()
    settings.REDIS_URL = server.url()
    settings.HUB_REDIS = RedisConfig(server.url())
    monkeypatch.setattr(streams, "_buffer", None)  # made again from the settings on first use
    yield server
    server.stop()


@pytest.fixture(autouse=True)
async def _stream_thread_disconnected():
    """The stream reads the database in asgiref's one thread for sync code, whose connection would
    otherwise outlive the test and keep the test database from being dropped."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def streaming(user, make_agent, private_redis, monkeypatch):
    """A reply streaming under a running run: "Hello" so far in the replay buffer. The run's task
    is never sent: this test is its worker (a live hub's worker of the package would claim it)."""
    monkeypatch.setattr(runs, "dispatch_on_commit", lambda run: None)
    agent = make_agent(user, name="Talker", settings={"script": {"reply": "unused"}})
    trigger = chat_services.send_message(chat=agent.main_chat, content="hi")
    run = Run.objects.get(trigger_message=trigger)
    token = runs.claim(run.pk)
    reply = chat_services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    streams.replay_buffer().reset(reply.pk, {"text": "Hello"})
    return {"run": run, "token": token, "reply": reply}


def stream_more(streaming, offset: int, text: str) -> None:
    """What the worker does each tick (and after a restart: it writes the buffer whole)."""
    reply = streaming["reply"]
    streams.replay_buffer().stream_many([(reply.pk, reply.chat_id, {"text": text}, [
        events.message_delta(message_id=reply.pk, run_id=streaming["run"].pk, offset=offset, text=text)])])


def finish(streaming, content: str) -> None:
    chat_services.settle_reply(message=streaming["reply"], status="final", content=content)
    runs.finish(streaming["run"].pk, streaming["token"], Run.Status.SUCCEEDED)


def parse(chunk: bytes) -> dict:
    fields = {}
    for line in chunk.decode().strip().splitlines():
        name, _, value = line.partition(": ")
        fields[name] = value
    return {"event": fields.get("event"), "id": fields.get("id"), "data": json.loads(fields.get("data", "{}"))}


async def next_chunk(stream, timeout=5.0) -> bytes:
    return await asyncio.wait_for(stream.__anext__(), timeout)


async def events_until(stream, predicate, timeout=10.0) -> list[dict]:
    got = []
    deadline = time.monotonic() + timeout
    while not got or not predicate(got[-1]):
        chunk = await next_chunk(stream, timeout=max(0.1, deadline - time.monotonic()))
        if chunk != KEEPALIVE:
            got.append(parse(chunk))
    return got


def text_of(got: list[dict]) -> str:
    text = ""
    for event in got:
        if event["event"] == "message.delta":
            assert event["data"]["offset"] == len(text), "gap or repeat"
            text += event["data"]["text"]
    return text


async def test_while_redis_is_away_the_stream_sends_keepalives_then_goes_on_where_it_was(streaming,
                                                                                       private_redis):
    stream = run_events.stream_runs([run_events.RunFollower(streaming["run"].pk)])
    got = await events_until(stream, lambda e: e["event"] == "message.delta")

    await asyncio.to_thread(private_redis.sigkill)
    quiet_since, keepalives = time.monotonic(), 0
    while time.monotonic() - quiet_since < 2.5:
        assert await next_chunk(stream, timeout=3) == KEEPALIVE  # nothing else, but never silent
        keepalives += 1
    assert keepalives >= 2

    await asyncio.to_thread(private_redis.start)  # empty: the worker writes the buffer whole
    await database_sync_to_async(stream_more)(streaming, 5, ", world")
    got += await events_until(stream, lambda e: e["event"] == "message.delta" and e["data"]["offset"] == 5)
    await database_sync_to_async(finish)(streaming, "Hello, world")
    got += await events_until(stream, lambda e: e["event"] == "end")
    assert text_of(got) == "Hello, world"
    assert [e["data"]["message"]["content"] for e in got if e["event"] == "message.settled"] == ["Hello, world"]


async def test_if_redis_stays_away_the_stream_ends_with_an_error_and_resumes_exactly(streaming, private_redis,
                                                                                   monkeypatch):
    monkeypatch.setattr(run_events, "OUTAGE_SECONDS", 1.5)
    stream = run_events.stream_runs([run_events.RunFollower(streaming["run"].pk)])
    first = await events_until(stream, lambda e: e["event"] == "message.delta")

    await asyncio.to_thread(private_redis.sigkill)
    last = await events_until(stream, lambda e: e["event"] == "error")
    assert [e["event"] for e in last] == ["error"]
    assert last[0]["id"] is None  # the client's Last-Event-ID stays the last event it got
    assert last[0]["data"]["error"]["code"] == "unavailable" and last[0]["data"]["error"]["fields"] == {}
    with pytest.raises(StopAsyncIteration):
        await next_chunk(stream)

    await asyncio.to_thread(private_redis.start)
    await database_sync_to_async(stream_more)(streaming, 5, ", world")
    resumed = run_events.stream_runs([run_events.RunFollower(
        streaming["run"].pk, run_events.Position.parse(first[-1]["id"], streaming["run"].pk))])
    rest = await events_until(resumed, lambda e: e["event"] == "message.delta")
    await database_sync_to_async(finish)(streaming, "Hello, world")
    rest += await events_until(resumed, lambda e: e["event"] == "end")
    assert text_of(first + rest) == "Hello, world"
    statuses = [e["data"]["run"]["status"] for e in first + rest if e["event"] == "run.updated"]
    assert statuses == ["queued", "running", "succeeded"]  # no state change missed or repeated
