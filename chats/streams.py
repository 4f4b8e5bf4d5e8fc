"""The per-message replay buffer of a streaming reply: the exact text streamed so far, per part,
and the live deltas that go out with it.

The live deltas may be lost (a tab reconnecting, a web process that lost its subscription); this
buffer (Redis, or memory in embedded mode) is what a tab that (re)connects mid-stream reads first,
and what a socket fills a gap from. Offsets are in characters.

With Redis, a delta is published on the chat's delta channel in the same round trip that appends
its text to the buffer (the append first, so whoever hears the delta finds its text stored); each
web process subscribes once per chat its tabs have open (chats.deltafeed). That is one Redis
command per delta, where the channel layer's group send and receive take seven. Embedded, deltas
go through the in-process channel layer with every other event.
"""

import json
import threading

from django.conf import settings

PARTS = ("text", "reasoning")
TTL_SECONDS = 24 * 3600


def _key(message_id, part: str) -> str:
    return f"hub:replay:{message_id}:{part}"


def delta_channel(chat_id) -> str:
    return f"hub:deltas:{chat_id}"


class MemoryBuffer:
    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}

    def append(self, message_id, chunks: dict[str, str]) -> None:
        with self._lock:
            for part, text in chunks.items():
                self._data[_key(message_id, part)] = self._data.get(_key(message_id, part), "") + text

    def stream(self, message_id, chunks: dict[str, str], *, chat_id, deltas: list[dict]) -> None:
        """Append chunks, then send the delta events to the chat's tabs."""
        from chats import events

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
        # KEYS: the parts' buffers; ARGV: the chat's delta channel, how many texts, the texts (one
        # per key), then the delta events to publish.
        self._stream_script = self._redis.register_script("""
            local texts = tonumber(ARGV[2])
            for i = 1, texts do redis.call('APPEND', KEYS[i], ARGV[2 + i]) end
            for i = 3 + texts, #ARGV do redis.call('PUBLISH', ARGV[1], ARGV[i]) end
        """)

    def append(self, message_id, chunks: dict[str, str]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for part, text in chunks.items():
            pipe.append(_key(message_id, part), text.encode())
            pipe.expire(_key(message_id, part), TTL_SECONDS)
        pipe.execute()

    def stream(self, message_id, chunks: dict[str, str], *, chat_id, deltas: list[dict]) -> None:
        """Append chunks and publish the delta events: one command, appends first.

        The keys keep the expiry reset() gave them (APPEND leaves a key's TTL as it is).
        """
        keys = [_key(message_id, part) for part in chunks]
        self._stream_script(keys=keys, args=[delta_channel(chat_id), len(keys), *chunks.values(),
                                             *(json.dumps(delta) for delta in deltas)])

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
