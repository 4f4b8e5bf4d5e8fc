"""The per-message replay buffer of a streaming reply: the exact text streamed so far, per part,
and the live deltas that go out with it.

The live deltas may be lost (a tab reconnecting, a web process that lost its subscription); this
buffer (Redis, or memory in embedded mode) is what a tab that (re)connects mid-stream reads first,
and what a socket fills a gap from. Offsets are in characters.

With Redis, a worker sends the deltas of all its streams in one command per tick: it appends their
texts to the buffers and publishes them together, as one message, on the delta channel (the
appends first, so whoever hears a delta finds its text stored). Each web process subscribes once
and hands every delta to the tabs of its chat (chats.deltafeed). The channel layer's group send
and receive took seven Redis commands per delta, and a message per delta cost the web process
more to read than the whole batch. Embedded, deltas go through the in-process channel layer with
every other event.
"""

import json
import threading

from django.conf import settings

PARTS = ("text", "reasoning")
TTL_SECONDS = 24 * 3600


def _key(message_id, part: str) -> str:
    return f"hub:replay:{message_id}:{part}"


def delta_channel() -> str:
    """The channel the deltas go out on. Pub/sub channels span Redis's databases: the database is
    in the name, so hubs that share a server only hear their own."""
    from redis.connection import parse_url

    return f"hub:deltas:{parse_url(settings.REDIS_URL).get('db', 0)}"


class MemoryBuffer:
    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}

    def append(self, message_id, chunks: dict[str, str]) -> None:
        with self._lock:
            for part, text in chunks.items():
                self._data[_key(message_id, part)] = self._data.get(_key(message_id, part), "") + text

    def stream_many(self, batch: list[tuple]) -> None:
        """For each (message_id, chat_id, chunks, deltas): append chunks, then send the deltas to
        the chat's tabs."""
        from chats import events

        for message_id, chat_id, chunks, deltas in batch:
            self.append(message_id, chunks)
            for delta in deltas:
                events.broadcast_now(events.chat_group(chat_id), delta)

    def read(self, message_id) -> dict[str, str]:
        with self._lock:
            return {part: self._data.get(_key(message_id, part), "") for part in PARTS}

    def reset(self, message_id, parts: dict[str, str]) -> None:
        with self._lock:
            for part in PARTS:
                self._data[_key(message_id, part)] = parts.get(part, "")

    def clear(self, message_id) -> None:
        with self._lock:
            for part in PARTS:
                self._data.pop(_key(message_id, part), None)


class RedisBuffer:
    def __init__(self, url: str):
        import redis

        self._redis = redis.Redis.from_url(url)
        self._channel = delta_channel()
        # KEYS: the buffers to append to; ARGV: their texts (one per key), the delta channel and
        # the batch of deltas to publish on it.
        self._stream_script = self._redis.register_script("""
            for i = 1, #KEYS do redis.call('APPEND', KEYS[i], ARGV[i]) end
            redis.call('PUBLISH', ARGV[#KEYS + 1], ARGV[#KEYS + 2])
        """)

    def append(self, message_id, chunks: dict[str, str]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for part, text in chunks.items():
            pipe.append(_key(message_id, part), text.encode())
            pipe.expire(_key(message_id, part), TTL_SECONDS)
        pipe.execute()

    def stream_many(self, batch: list[tuple]) -> None:
        """For each (message_id, chat_id, chunks, deltas): append chunks, then publish all the
        deltas as one message, [[chat id, delta], ...]. One command for the whole batch.

        The keys keep the expiry reset() gave them (APPEND leaves a key's TTL as it is).
        """
        keys, texts, published = [], [], []
        for message_id, chat_id, chunks, deltas in batch:
            keys += [_key(message_id, part) for part in chunks]
            texts += chunks.values()
            published += [[str(chat_id), delta] for delta in deltas]
        self._stream_script(keys=keys, args=[*texts, self._channel, json.dumps(published)])

    def read(self, message_id) -> dict[str, str]:
        values = self._redis.mget([_key(message_id, part) for part in PARTS])
        return {part: (value or b"").decode() for part, value in zip(PARTS, values, strict=True)}

    def reset(self, message_id, parts: dict[str, str]) -> None:
        pipe = self._redis.pipeline(transaction=True)
        for part in PARTS:
            pipe.set(_key(message_id, part), parts.get(part, "").encode(), ex=TTL_SECONDS)
        pipe.execute()

    def clear(self, message_id) -> None:
        self._redis.delete(*[_key(message_id, part) for part in PARTS])


def furthest_parts(message_id, parts: dict[str, str]) -> dict[str, str]:
    """These stored parts, each replaced by the replay buffer's text when that got further.

    The buffer is ahead of the database by the deltas since the last checkpoint; a buffer that
    does not start with the stored text belongs to an older attempt and is ignored.
    """
    streamed = replay_buffer().read(message_id)
    return {part: streamed[part] if len(streamed[part]) > len(text) and streamed[part].startswith(text) else text
            for part, text in parts.items()}


_buffer = None
_buffer_lock = threading.Lock()


def replay_buffer():
    global _buffer
    with _buffer_lock:
        if _buffer is None:
            _buffer = RedisBuffer(settings.REDIS_URL) if settings.REDIS_URL else MemoryBuffer()
        return _buffer
