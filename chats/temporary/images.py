"""Where temporary chats' images live: Redis in production, process memory when embedded.

An image is stored with a version number. A writer holds the chat's lock (a token with an expiry,
so a process killed mid-transaction does not hold it for ever), loads the newest image, writes,
and stores the next version only if it still holds the lock and nobody stored another version in
between. Readers compare versions and load an image only when it changed. Every store renews
the chat's expiry: a temporary chat lives `HUB_TEMPORARY_HOURS` after its last write.
"""

import threading
import time
import uuid
import zlib

from django.conf import settings

LOCK_SECONDS = 30
LOCK_WAIT_SECONDS = 10
# Ids of a temporary chat's rows start above any a stored chat will reach, in a block of their
# own, and stay below 2**53 so a browser reads them exactly.
ID_BASE = 2**52
ID_BLOCK = 2**24


class ChatGone(Exception):
    """The temporary chat expired or was deleted."""


class ChatBusy(Exception):
    """Another writer held the chat's lock for longer than a writer waits."""


class LostLock(Exception):
    """A writer's lock expired, or another version was stored, before it could store its own."""


def expiry_seconds() -> int:
    return max(1, int(settings.HUB_TEMPORARY_HOURS * 3600))


def _pack(image: bytes) -> bytes:
    # An image is mostly empty pages; compressed, a new chat is a few kilobytes.
    return zlib.compress(image, 1)


def _unpack(data: bytes) -> bytes:
    return zlib.decompress(data)


class MemoryImages:
    """The embedded hub's images: in this process, gone when it stops."""

    def __init__(self):
        self._lock = threading.Lock()
        self._images: dict[str, tuple[int, bytes, float]] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._owned: dict[int, dict[str, float]] = {}
        self._runs: dict[str, str] = {}
        self._ids = 0

    def _live(self, key: str):
        entry = self._images.get(key)
        if entry is not None and entry[2] < time.monotonic():
            del self._images[key]
            return None
        return entry

    def version(self, key: str) -> int | None:
        with self._lock:
            entry = self._live(key)
            return None if entry is None else entry[0]

    def load(self, key: str) -> tuple[int, bytes]:
        with self._lock:
            entry = self._live(key)
        if entry is None:
            raise ChatGone(key)
        return entry[0], _unpack(entry[1])

    def create(self, key: str, image: bytes) -> None:
        with self._lock:
            self._images[key] = (1, _pack(image), time.monotonic() + expiry_seconds())

    def store(self, key: str, *, token: str, expected: int, image: bytes) -> int:
        with self._lock:
            held = self._locks.get(key)
            entry = self._live(key)
            if held is None or held[0] != token or held[1] < time.monotonic():
                raise LostLock(key)
            if entry is None:
                raise ChatGone(key)
            if entry[0] != expected:
                raise LostLock(key)
            self._images[key] = (expected + 1, _pack(image), time.monotonic() + expiry_seconds())
            return expected + 1

    def acquire(self, key: str) -> str:
        token = uuid.uuid4().hex
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            with self._lock:
                held = self._locks.get(key)
                if held is None or held[1] < time.monotonic():
                    self._locks[key] = (token, time.monotonic() + LOCK_SECONDS)
                    return token
            if time.monotonic() > deadline:
                raise ChatBusy(key)
            time.sleep(0.001)

    def release(self, key: str, token: str) -> None:
        with self._lock:
            if self._locks.get(key, ("",))[0] == token:
                del self._locks[key]

    def delete(self, key: str) -> None:
        with self._lock:
            self._images.pop(key, None)

    def ttl(self, key: str) -> float | None:
        with self._lock:
            entry = self._live(key)
            return None if entry is None else entry[2] - time.monotonic()

    def next_id_block(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def register(self, owner_id: int, key: str) -> None:
        with self._lock:
            self._owned.setdefault(owner_id, {})[key] = time.time()

    def owned(self, owner_id: int) -> list[str]:
        with self._lock:
            keys = self._owned.get(owner_id, {})
            for key in [k for k in keys if self._live(k) is None]:
                del keys[key]
            return sorted(keys, key=keys.get)

    def forget(self, owner_id: int, key: str) -> None:
        with self._lock:
            self._owned.get(owner_id, {}).pop(key, None)

    def note_run(self, run_id: str, key: str) -> None:
        with self._lock:
            self._runs[run_id] = key

    def chat_of_run(self, run_id: str) -> str | None:
        with self._lock:
            key = self._runs.get(run_id)
            return key if key is not None and self._live(key) is not None else None

    def every_registered(self) -> list[tuple[int, str, bool]]:
        """(owner id, chat id, alive) of every registered chat, expired ones included."""
        with self._lock:
            return [(owner_id, key, self._live(key) is not None)
                    for owner_id, keys in self._owned.items() for key in list(keys)]


# Stores the next version if the caller holds the lock and the stored version is the one it
# loaded: KEYS image, version, lock; ARGV token, expected version, image, expiry in seconds.
_STORE = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local current = redis.call('GET', KEYS[2])
if not current then return -2 end
if tonumber(current) ~= tonumber(ARGV[2]) then return -1 end
local next = tonumber(current) + 1
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
redis.call('SET', KEYS[2], next, 'EX', ARGV[4])
return next
"""

# Deletes the lock only if it is still the caller's.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisImages:
    """Images in Redis, seen by every web and worker process."""

    def __init__(self, config):
        self._redis = config.client(socket_timeout=10, socket_connect_timeout=3)
        self._store = self._redis.register_script(_STORE)
        self._release = self._redis.register_script(_RELEASE)

    @staticmethod
    def _keys(key: str) -> tuple[str, str, str]:
        return f"hub:temp:{key}:image", f"hub:temp:{key}:version", f"hub:temp:{key}:lock"

    def version(self, key: str) -> int | None:
        value = self._redis.get(self._keys(key)[1])
        return None if value is None else int(value)

    def load(self, key: str) -> tuple[int, bytes]:
        image_key, version_key, _ = self._keys(key)
        # One MULTI, so the version is the image's.
        with self._redis.pipeline(transaction=True) as pipe:
            version, image = pipe.get(version_key).get(image_key).execute()
        if version is None or image is None:
            raise ChatGone(key)
        return int(version), _unpack(image)

    def create(self, key: str, image: bytes) -> None:
        image_key, version_key, _ = self._keys(key)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(image_key, _pack(image), ex=expiry_seconds()).set(version_key, 1, ex=expiry_seconds()).execute()

    def store(self, key: str, *, token: str, expected: int, image: bytes) -> int:
        result = self._store(keys=self._keys(key), args=[token, expected, _pack(image), expiry_seconds()])
        if result == -2:
            raise ChatGone(key)
        if result == -1:
            raise LostLock(key)
        return int(result)

    def acquire(self, key: str) -> str:
        token = uuid.uuid4().hex
        lock_key = self._keys(key)[2]
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        pause = 0.001
        while not self._redis.set(lock_key, token, nx=True, ex=LOCK_SECONDS):
            if time.monotonic() > deadline:
                raise ChatBusy(key)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        return token

    def release(self, key: str, token: str) -> None:
        self._release(keys=[self._keys(key)[2]], args=[token])

    def delete(self, key: str) -> None:
        self._redis.delete(*self._keys(key))

    def ttl(self, key: str) -> float | None:
        seconds = self._redis.ttl(self._keys(key)[1])
        return None if seconds < 0 else float(seconds)

    def next_id_block(self) -> int:
        return int(self._redis.incr("hub:temp:id-blocks"))

    @staticmethod
    def _owner_key(owner_id: int) -> str:
        return f"hub:temp:owner:{owner_id}"

    def register(self, owner_id: int, key: str) -> None:
        self._redis.zadd(self._owner_key(owner_id), {key: time.time()})

    def owned(self, owner_id: int) -> list[str]:
        """The owner's live temporary chats, oldest first; the expired ones are dropped here."""
        keys = [k.decode() for k in self._redis.zrange(self._owner_key(owner_id), 0, -1)]
        if not keys:
            return []
        alive = self._redis.mget([self._keys(k)[1] for k in keys])
        gone = [k for k, version in zip(keys, alive, strict=True) if version is None]
        if gone:
            self._redis.zrem(self._owner_key(owner_id), *gone)
        return [k for k, version in zip(keys, alive, strict=True) if version is not None]

    def forget(self, owner_id: int, key: str) -> None:
        self._redis.zrem(self._owner_key(owner_id), key)

    def note_run(self, run_id: str, key: str) -> None:
        self._redis.set(f"hub:temp:run:{run_id}", key, ex=expiry_seconds())

    def chat_of_run(self, run_id: str) -> str | None:
        key = self._redis.get(f"hub:temp:run:{run_id}")
        return key.decode() if key is not None else None

    def every_registered(self) -> list[tuple[int, str, bool]]:
        """(owner id, chat id, alive) of every registered chat, expired ones included."""
        found = []
        for owner_key in self._redis.scan_iter(match="hub:temp:owner:*", count=500):
            owner_id = int(owner_key.decode().rsplit(":", 1)[1])
            keys = [k.decode() for k in self._redis.zrange(owner_key, 0, -1)]
            if keys:
                versions = self._redis.mget([self._keys(k)[1] for k in keys])
                found += [(owner_id, k, v is not None) for k, v in zip(keys, versions, strict=True)]
        return found


_images = None
_images_lock = threading.Lock()


def images():
    """This process's image store: Redis when REDIS_URL is set, memory otherwise."""
    global _images
    with _images_lock:
        if _images is None:
            _images = RedisImages(settings.HUB_REDIS) if settings.HUB_REDIS else MemoryImages()
        return _images


def first_id(block: int) -> int:
    """The first row id of a temporary chat given its id block."""
    return ID_BASE + (block % (2**53 // ID_BLOCK - ID_BASE // ID_BLOCK - 1)) * ID_BLOCK
