"""Throttling of log-ins, API tokens and sign-ups, shared by every web process through the cache.

One rule for all three: a key (a username or a client address) may make `limit` attempts per
window (HUB_THROTTLE_WINDOW_SECONDS). The attempt that reaches the limit locks the key for one
window; each further lock doubles, up to HUB_THROTTLE_MAX_LOCK_SECONDS, and the count of locks is
forgotten a day after the last one. While a key is locked every attempt is refused before it is
checked, a correct password too: otherwise a lock would only slow the guesses, not stop them.

The counters are cache entries with an expiry (Redis when REDIS_URL is set, so all web processes
and hosts count together; process memory in embedded mode, which has one process). Keys are
digests, so neither usernames nor addresses are stored in the cache.
"""

import hashlib
import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

# How long the number of locks (which sets the next lock's length) is remembered.
LOCK_MEMORY_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Throttle:
    """Attempts of one kind (`scope`); the limit is read from the setting named `limit_setting`
    at each call, so a changed setting applies at once."""

    scope: str
    limit_setting: str

    def _key(self, part: str, key: str) -> str:
        return f"throttle:{self.scope}:{part}:" + hashlib.sha256(key.encode()).hexdigest()

    def seconds_locked(self, key: str) -> int:
        """Seconds until `key` may try again; 0 when it is not locked."""
        until = cache.get(self._key("lock", key))
        if until is None:
            return 0
        return max(0, math.ceil(until - time.time()))

    def record(self, key: str) -> int:
        """Count one attempt of `key`; returns the seconds of the lock it started (0 for none)."""
        window = settings.HUB_THROTTLE_WINDOW_SECONDS
        if _increment(self._key("count", key), timeout=window) < getattr(settings, self.limit_setting):
            return 0
        cache.delete(self._key("count", key))
        locks = _increment(self._key("locks", key), timeout=LOCK_MEMORY_SECONDS)
        cache.touch(self._key("locks", key), LOCK_MEMORY_SECONDS)
        seconds = min(window * 2 ** (locks - 1), settings.HUB_THROTTLE_MAX_LOCK_SECONDS)
        cache.set(self._key("lock", key), time.time() + seconds, timeout=seconds)
        return seconds

    def reset(self, key: str) -> None:
        """Forget the attempts and earlier locks of `key` (a lock in force stays)."""
        cache.delete_many([self._key("count", key), self._key("locks", key)])


def _increment(key: str, *, timeout: int) -> int:
    """Add one to a counter that starts at the first increment and expires `timeout` later."""
    for _ in range(3):
        cache.add(key, 0, timeout=timeout)
        try:
            return cache.incr(key)
        except ValueError:
            continue  # it expired between add and incr: start it again
    return 1


LOGIN_BY_USERNAME = Throttle("login-user", "HUB_LOGIN_FAILURE_LIMIT")
LOGIN_BY_ADDRESS = Throttle("login-address", "HUB_LOGIN_FAILURE_LIMIT")
TOKEN_BY_ADDRESS = Throttle("token-address", "HUB_TOKEN_FAILURE_LIMIT")
SIGNUP_BY_ADDRESS = Throttle("signup-address", "HUB_SIGNUP_LIMIT")


def client_address(request) -> str:
    """The address the request came from: REMOTE_ADDR, or behind the operator's proxy
    (HUB_BEHIND_PROXY) the right-most X-Forwarded-For entry, the one that proxy added; the
    entries left of it are whatever the client chose to send."""
    if getattr(settings, "HUB_BEHIND_PROXY", False):
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        forwarded = [part for part in forwarded if part]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")


def username_key(username: str) -> str:
    # Usernames differ in case only on purpose rarely; an attacker must not get a fresh count by
    # changing the case of one.
    return (username or "").strip().casefold()


def describe_wait(seconds: int) -> str:
    """'45 seconds', '1 minute', '12 minutes': how long a person is asked to wait."""
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
