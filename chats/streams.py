"""The per-message replay buffer of a streaming reply: the exact text streamed so far, per part,
and the live deltas that go out with it.

The live deltas may be lost (a tab reconnecting, a web process that lost its subscription); this
buffer (Redis, or memory in embedded mode) is what a tab that (re)connects mid-stream reads first,
and what a socket fills a gap from. Offsets are in characters.

With Redis, a worker sends the deltas of all its streams in one command per tick: it appends their
texts to the buffers and publishes them (the appends first, so whoever hears a delta finds its text
stored). Each web process registers the chats it has tabs for (a sorted set per chat of process
ids, scored by the lease's end: chats.deltafeed), and the command sends each web process one
message holding only the deltas of its chats, on that process's own channel. A process thus reads
one message per tick however many chats stream, and Redis sends each delta once per process that
shows it, however many web processes there are. The channel layer's group send and receive took
seven Redis commands per delta; a message per delta cost the web process more to read than a
whole batch. Embedded, the buffer hands each batch to the event loops that have tabs
(chats.deltafeed.MemoryDeltaFeed) the same way, without waiting for them.

Redis may lose a buffer (a restart without persistence) or an append (sent while it was away).
The worker streaming the reply keeps its own copy of the text (Mirror): its next send finds the
buffer short and writes it whole before those deltas go out, so no reader finds a hole.
"""

import json
import logging
import threading
import time
import weakref

from django.conf import settings
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

PARTS = ("text", "reasoning")
TTL_SECONDS = 24 * 3600


def _key(message_id, part: str) -> str:
    return f"hub:replay:{message_id}:{part}"


def delta_channel_prefix() -> str:
    """Each web process hears its deltas on this followed by its feed id. Pub/sub channels span
    Redis's databases: the database is in the name, so hubs that share a server only hear their own."""
    return f"hub:deltas:{settings.HUB_REDIS.db}:"


def delta_channel(feed_id: str) -> str:
    return f"{delta_channel_prefix()}{feed_id}"


def watch_key(chat_id) -> str:
    """The web processes with a tab for the chat: feed id → when its lease ends (Redis time, ms)."""
    return f"hub:watch:{chat_id}"


class MemoryBuffer:
    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}
        # The embedded delta feeds (chats.deltafeed.MemoryDeltaFeed), one per event loop with tabs.
        self.feeds = weakref.WeakSet()

    def append(self, message_id, chunks: dict[str, str]) -> None:
        with self._lock:
            for part, text in chunks.items():
                self._data[_key(message_id, part)] = self._data.get(_key(message_id, part), "") + text

    def stream_many(self, batch: list[tuple]) -> None:
        """For each (message_id, chat_id, chunks, deltas): append chunks, then hand all the deltas
        to each feed, [(chat id, delta), ...], without waiting for the tabs."""
        published = []
        for message_id, chat_id, chunks, deltas in batch:
            self.append(message_id, chunks)
            published += [(str(chat_id), delta) for delta in deltas]
        for feed in list(self.feeds):
            feed.publish(published)

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


# Publish each web process its chats' deltas, one message per process. KEYS[first..] are the watch
# keys of the batch's chats; ARGV[fragment + j - first] is the deltas of the j-th of them, each
# `["<chat id>", {delta}]`, joined by commas. A process whose lease ended hears nothing.
ROUTE_LUA = """
    local function route(first, fragment, prefix)
        local clock = redis.call('TIME')
        local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
        local out, feeds = {}, {}
        for j = first, #KEYS do
            for _, feed in ipairs(redis.call('ZRANGEBYSCORE', KEYS[j], now, '+inf')) do
                if out[feed] == nil then out[feed] = {}; feeds[#feeds + 1] = feed end
                out[feed][#out[feed] + 1] = ARGV[fragment + j - first]
            end
        end
        for _, feed in ipairs(feeds) do
            redis.call('PUBLISH', prefix .. feed, '[' .. table.concat(out[feed], ',') .. ']')
        end
    end
"""
# KEYS: the n buffers to append to, then the watch keys of the batch's chats. ARGV: n, the TTL, the
# channel prefix, the n texts, the byte length each buffer must have now (-1: not checked), then the
# chats' delta fragments. A buffer whose length is not what its writer expects lost writes (Redis
# restarted, or a send failed): nothing is written and those buffers' positions come back for the
# writer to repair.
STREAM_SCRIPT = ROUTE_LUA + """
    local n = tonumber(ARGV[1])
    local behind = {}
    for i = 1, n do
        local want = tonumber(ARGV[3 + n + i])
        if want >= 0 and redis.call('STRLEN', KEYS[i]) ~= want then behind[#behind + 1] = i end
    end
    if #behind > 0 then return behind end
    for i = 1, n do
        if redis.call('APPEND', KEYS[i], ARGV[3 + i]) == string.len(ARGV[3 + i]) then
            redis.call('EXPIRE', KEYS[i], ARGV[2])
        end
    end
    route(n + 1, 4 + 2 * n, ARGV[3])
    return behind
"""
# As STREAM_SCRIPT, but each buffer's ARGV is its whole text ("set") or its new text ("append"), one
# mode per buffer in place of the lengths. The buffers are whole again before the deltas go out, so
# a tab that sees an offset jump finds the text it missed.
REPAIR_SCRIPT = ROUTE_LUA + """
    local n = tonumber(ARGV[1])
    for i = 1, n do
        if ARGV[3 + n + i] == 'set' then
            redis.call('SET', KEYS[i], ARGV[3 + i], 'EX', ARGV[2])
        elseif redis.call('APPEND', KEYS[i], ARGV[3 + i]) == string.len(ARGV[3 + i]) then
            redis.call('EXPIRE', KEYS[i], ARGV[2])
        end
    end
    route(n + 1, 4 + 2 * n, ARGV[3])
"""
# KEYS: watch keys. ARGV: the feed id and the lease in seconds. The feed's lease on each chat starts
# again from Redis's clock; leases of processes that stopped renewing are dropped, and a key whose
# processes all stopped expires with the last lease.
WATCH_SCRIPT = """
    local clock = redis.call('TIME')
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    for i = 1, #KEYS do
        redis.call('ZADD', KEYS[i], now + tonumber(ARGV[2]) * 1000, ARGV[1])
        redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
        redis.call('EXPIRE', KEYS[i], ARGV[2])
    end
"""
MIRROR_IDLE_SECONDS = 600  # a reply not streamed for this long is forgotten by its writer


class Mirror:
    """The writer's own copy of each reply it streams: what its buffer must hold.

    Redis may lose a buffer (a restart without persistence) or miss an append (a send that failed
    while it was away). The process that streams the reply still knows the whole text, so the next
    send finds the buffer short and writes it whole again.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._texts: dict = {}  # message id → {part: (text, its length in UTF-8 bytes)}
        self._used: dict = {}  # message id → when last written (monotonic)
        self._swept_at = time.monotonic()

    def set(self, message_id, parts: dict[str, str]) -> None:
        with self._lock:
            self._texts[message_id] = {part: (parts.get(part, ""), len(parts.get(part, "").encode()))
                                       for part in PARTS}
            self._used[message_id] = time.monotonic()

    def drop(self, message_id) -> None:
        with self._lock:
            self._texts.pop(message_id, None)
            self._used.pop(message_id, None)

    def append(self, message_id, chunks: dict[str, str]) -> dict[str, tuple[int, str]] | None:
        """Add chunks; returns {part: (bytes the buffer held before, whole text now)}, or None for
        a reply this process never reset (it cannot vouch for that buffer)."""
        with self._lock:
            texts = self._texts.get(message_id)
            if texts is None:
                return None
            now = time.monotonic()
            self._used[message_id] = now
            out = {}
            for part, text in chunks.items():
                before, size = texts.get(part, ("", 0))
                texts[part] = (before + text, size + len(text.encode()))
                out[part] = (size, texts[part][0])
            self._forget_idle(now)
            return out

    def _forget_idle(self, now: float) -> None:
        """Replies whose turn ended without clear() (its lease was lost, say) are dropped in time."""
        if now - self._swept_at < 60:
            return
        self._swept_at = now
        for message_id in [m for m, used in self._used.items() if now - used > MIRROR_IDLE_SECONDS]:
            self._texts.pop(message_id, None)
            self._used.pop(message_id, None)


class RedisBuffer:
    """Writes never raise: a reply streams on while Redis is away, and the writer repairs the
    buffer from its Mirror once Redis answers again. Reads raise (the reader decides what to do)."""

    def __init__(self, config):
        self._redis = config.client()
        self._prefix = delta_channel_prefix()
        self._stream_script = self._redis.register_script(STREAM_SCRIPT)
        self._repair_script = self._redis.register_script(REPAIR_SCRIPT)
        self._mirror = Mirror()
        self._failing = False  # the last write failed: say so once, and once when it works again

    def _wrote(self, ok: bool, what: str) -> None:
        if not ok and not self._failing:
            log.warning("the replay buffer cannot reach Redis (%s); replies stream on and their "
                        "buffers are written whole once it answers", what, exc_info=True)
        elif ok and self._failing:
            log.warning("the replay buffer reaches Redis again")
        self._failing = not ok

    def append(self, message_id, chunks: dict[str, str]) -> None:
        """Append without publishing (the text is the writer's too: its Mirror grows with it)."""
        self._mirror.append(message_id, chunks)
        pipe = self._redis.pipeline(transaction=False)
        for part, text in chunks.items():
            pipe.append(_key(message_id, part), text.encode())
            pipe.expire(_key(message_id, part), TTL_SECONDS)
        pipe.execute()

    def stream_many(self, batch: list[tuple]) -> None:
        """For each (message_id, chat_id, chunks, deltas): append chunks, then send each web process
        that shows one of the chats its deltas, as one message [[chat id, delta], ...]. One command
        for the whole batch; a second only when a buffer lost writes and is written whole again.
        Never raises.
        """
        keys, texts, expected, whole = [], [], [], []
        fragments: dict[str, list[str]] = {}  # chat id → its deltas, as '["<chat id>", {delta}], …'
        for message_id, chat_id, chunks, deltas in batch:
            written = self._mirror.append(message_id, chunks)
            for part, text in chunks.items():
                keys.append(_key(message_id, part))
                texts.append(text)
                expected.append(written[part][0] if written else -1)
                whole.append(written[part][1] if written else None)
            if deltas:  # one encoding per chat, not per delta: the list's items without its brackets
                fragments.setdefault(str(chat_id), []).append(json.dumps([[str(chat_id), d] for d in deltas])[1:-1])
        watched = [watch_key(chat_id) for chat_id in fragments]
        routed = [",".join(parts) for parts in fragments.values()]
        head = [len(keys), TTL_SECONDS, self._prefix]
        try:
            behind = self._stream_script(keys=[*keys, *watched], args=[*head, *texts, *expected, *routed])
            if behind:
                # Redis lost what these buffers held: write them whole, then publish.
                modes = ["set" if whole[i] is not None else "append" for i in range(len(keys))]
                values = [whole[i] if whole[i] is not None else texts[i] for i in range(len(keys))]
                self._repair_script(keys=[*keys, *watched], args=[*head, *values, *modes, *routed])
        except RedisError:
            self._wrote(False, "streaming")
            return
        self._wrote(True, "streaming")

    def read(self, message_id) -> dict[str, str]:
        values = self._redis.mget([_key(message_id, part) for part in PARTS])
        return {part: (value or b"").decode() for part, value in zip(PARTS, values, strict=True)}

    def reset(self, message_id, parts: dict[str, str]) -> None:
        """Never raises: if Redis is away, the next stream_many writes the buffer whole."""
        self._mirror.set(message_id, parts)
        try:
            pipe = self._redis.pipeline(transaction=True)
            for part in PARTS:
                pipe.set(_key(message_id, part), parts.get(part, "").encode(), ex=TTL_SECONDS)
            pipe.execute()
        except RedisError:
            self._wrote(False, "reset")

    def clear(self, message_id) -> None:
        """Never raises: a buffer left behind expires with its TTL."""
        self._mirror.drop(message_id)
        try:
            self._redis.delete(*[_key(message_id, part) for part in PARTS])
        except RedisError:
            self._wrote(False, "clear")


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
            _buffer = RedisBuffer(settings.HUB_REDIS) if settings.HUB_REDIS else MemoryBuffer()
        return _buffer
