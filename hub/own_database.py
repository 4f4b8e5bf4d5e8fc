"""The hub's own database, even where an app has put another connection in its place.

chats runs a temporary chat's code on the chat's own connection, standing in for the hub's
database (chats.temporary.scope). What belongs to the hub whatever the chat (accounts, sessions,
API tokens) is read inside `own_database()`, which chats points at its way back at start-up:
hub knows the apps only through routing and settings, so it is handed the way, not told it.
"""

import contextlib

_way_back = contextlib.nullcontext


def provide(way_back) -> None:
    """way_back(): a context manager in which the default connection is the hub's own."""
    global _way_back
    _way_back = way_back


def own_database():
    return _way_back()
