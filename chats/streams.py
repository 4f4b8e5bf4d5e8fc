"""The per-message replay buffer of a streaming reply: the exact text streamed so far, per part.

The channel layer carries only the live tail and may drop; this buffer (Redis, or memory in
embedded mode) is what a tab that (re)connects mid-stream reads first. Offsets are in characters.
"""

import threading

from django.conf import settings

PARTS = ("text", "reasoning")
TTL_SECONDS = 24 * 3600


def _key(message_id, part: str) -> str:
    return f"hub:replay:{message_id}:{part}"


class MemoryBuffer:
    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}

    def append(self, message_id, chunks: dict[str, str]) -> None:
        with self._lock:
            for part, text in chunks.items():
                self._data[_key(message_id, part)] = self._data.get(_key(message_id, part), "") + text

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

    def append(self, message_id, chunks: dict[str, str]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        for part, text in chunks.items():
            pipe.append(_key(message_id, part), text.encode())
            pipe.expire(_key(message_id, part), TTL_SECONDS)
        pipe.execute()

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
