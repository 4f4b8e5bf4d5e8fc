"""The hub's settings for the benchmark's processes, with one override.

redis-py 8 reads with a 5 s socket timeout by default, the same 5 s that channels_redis blocks in
BZPOPMIN waiting for a message. In a Daphne with no event for 5 s the read times out first and
the websocket consumer waiting on it dies with close code 1011: one socket lost per 5 s of quiet.
That is a bug of hub/settings.py (reported); until CHANNEL_LAYERS gives the layer a longer timeout,
the benchmark does, so that sockets waiting for their round stay open.
"""

from hub.settings import *  # noqa: F403

CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [{"address": REDIS_URL, "socket_timeout": 30}]  # noqa: F405
