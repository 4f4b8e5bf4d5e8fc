"""Fixtures of the chats tests."""

import pytest


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Every test gets a channel layer of its own.

    channels-redis keeps one receive state per layer object: a consumer that an earlier test's
    event loop left waiting made the next test's sockets fail with "bound to a different event
    loop" (about one run of this file in four).
    """
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(scope="session", autouse=True)
def socket_frame_thread_disconnected(django_db_setup):
    """The sockets' frame threads outlive the tests with its database connection open, which
    would keep the test database from being dropped at the end."""
    yield
    from django.db import connections

    from chats.consumers import FRAME_THREADS

    FRAME_THREADS.run_on_each(connections.close_all)
