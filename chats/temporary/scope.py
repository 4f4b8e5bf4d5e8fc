"""Where code runs on a temporary chat's image instead of the hub's database.

    with scope.inside(chat_id):
        send_message(chat=chat, ...)      # the same services, on the image

Inside, Django's default connection (what the ORM, transaction.atomic and on_commit use) is the
chat's image connection, for this thread or task only. `outside()` reaches the hub's database again
from inside, for what a temporary chat reads but does not hold (other chats, shared documents,
secrets). Each thread keeps the connections of the last few chats it entered, so entering again
loads an image only when another process changed it.
"""

import contextlib
import contextvars
import threading
from collections import OrderedDict

from django.db import connections

from chats.temporary.connection import DatabaseWrapper

KEPT_PER_THREAD = 4

# The hub's own default connection, while a temporary chat's stands in for it.
_hub_connection = contextvars.ContextVar("hub_connection", default=None)
_kept = threading.local()


def current() -> str | None:
    """The temporary chat this code runs on, or None on the hub's database."""
    return getattr(connections["default"], "chat_key", None)


def _connection_for(key: str) -> DatabaseWrapper:
    kept = getattr(_kept, "connections", None)
    if kept is None:
        kept = _kept.connections = OrderedDict()
    connection = kept.pop(key, None) or DatabaseWrapper(key)
    kept[key] = connection
    while len(kept) > KEPT_PER_THREAD:
        # Forgotten, not closed: an outer block may still stand on it (its database goes when
        # nothing holds it any more).
        kept.popitem(last=False)
    return connection


@contextlib.contextmanager
def standing_in(connection):
    previous = connections["default"]
    hub_token = None
    if getattr(previous, "chat_key", None) is None:
        hub_token = _hub_connection.set(previous)
    connections["default"] = connection
    try:
        yield connection
    finally:
        connections["default"] = previous
        if hub_token is not None:
            _hub_connection.reset(hub_token)


@contextlib.contextmanager
def inside(chat_id):
    """Run the block on temporary chat chat_id's image."""
    key = str(chat_id)
    if current() == key:
        yield connections["default"]
        return
    with standing_in(_connection_for(key)) as connection:
        yield connection


def here():
    """Where this code runs now, to enter again from another thread: here()() is a context
    manager (a tool of a turn runs on a thread of the model loop, not the turn's own)."""
    key = current()
    if key is None:
        return contextlib.nullcontext
    return lambda: inside(key)


@contextlib.contextmanager
def outside():
    """Run the block on the hub's database, even inside a temporary chat."""
    hub = _hub_connection.get()
    previous = connections["default"]
    if hub is None or getattr(previous, "chat_key", None) is None:
        yield
        return
    connections["default"] = hub
    try:
        yield
    finally:
        connections["default"] = previous
