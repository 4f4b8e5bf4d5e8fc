"""Which pages may open a user's websocket: only the hub's own origin (scheme, host and port).

Every handshake here carries the user's real session cookie, as a browser sends it whichever page
opens the socket, and goes through the real ASGI application (hub.asgi): so a refusal is the
Origin check's doing, and the accepted control proves the same socket opens from the hub's page.
"""

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client, override_settings

from hub.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True)]

HUB = "127.0.0.1:8000"  # the host and port the hub is reached at in these handshakes


@pytest.fixture
def session_cookie(user):
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def opens(cookie, *, origin: str | None, host: str = HUB, extra=()) -> bool:
    """Whether the directory socket opens for this handshake."""
    headers = [(b"host", host.encode()), (b"cookie", cookie.encode()), *extra]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    communicator = WebsocketCommunicator(application, "/ws/directory/", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    if connected:
        await communicator.disconnect()
    return connected


async def test_the_hubs_own_origin_opens_the_socket(session_cookie):
    assert await opens(session_cookie, origin=f"http://{HUB}")


async def test_the_default_port_may_be_written_or_left_out(session_cookie):
    assert await opens(session_cookie, origin="http://localhost", host="localhost:80")
    assert await opens(session_cookie, origin="http://localhost:80", host="localhost")


@pytest.mark.parametrize("origin", [
    "http://127.0.0.1:8080",          # another web app on the same machine
    "http://127.0.0.1",               # the same host on the default port
    "https://127.0.0.1:8000",         # the same host and port over the other scheme
    "http://localhost:8000",          # another name for the same machine
    "http://evil.example",            # another site
    "null",                           # a sandboxed frame or a file: page
    "http://127.0.0.1:8000/chats/",   # not an origin at all
    "",
])
async def test_any_other_origin_is_refused(session_cookie, origin):
    assert not await opens(session_cookie, origin=origin)


async def test_a_handshake_without_an_origin_is_refused(session_cookie):
    assert not await opens(session_cookie, origin=None)


async def test_a_host_not_in_allowed_hosts_is_refused_even_when_origin_agrees(session_cookie):
    # DNS rebinding: a foreign name resolves to the hub, so the page's Origin and the Host agree.
    assert "rebind.example" not in settings.ALLOWED_HOSTS
    assert not await opens(session_cookie, origin="http://rebind.example:8000", host="rebind.example:8000")


@override_settings(CSRF_TRUSTED_ORIGINS=["https://chat.example.com", "https://*.corp.example"])
async def test_an_origin_in_csrf_trusted_origins_opens_the_socket(session_cookie):
    assert await opens(session_cookie, origin="https://chat.example.com")
    assert await opens(session_cookie, origin="https://team.corp.example")
    # Trusted exactly as listed: the scheme and the port still count.
    assert not await opens(session_cookie, origin="http://chat.example.com")
    assert not await opens(session_cookie, origin="https://chat.example.com:8443")


@override_settings(ALLOWED_HOSTS=["hub.example.com"], HUB_BEHIND_PROXY=True)
async def test_behind_a_proxy_the_scheme_comes_from_x_forwarded_proto(session_cookie):
    https = [(b"x-forwarded-proto", b"https")]
    assert await opens(session_cookie, origin="https://hub.example.com", host="hub.example.com", extra=https)
    assert not await opens(session_cookie, origin="http://hub.example.com", host="hub.example.com", extra=https)
    plain = [(b"x-forwarded-proto", b"http")]
    assert await opens(session_cookie, origin="http://hub.example.com", host="hub.example.com", extra=plain)


@override_settings(ALLOWED_HOSTS=["hub.example.com"], HUB_BEHIND_PROXY=False)
async def test_without_a_proxy_x_forwarded_proto_is_not_believed(session_cookie):
    https = [(b"x-forwarded-proto", b"https")]
    assert not await opens(session_cookie, origin="https://hub.example.com", host="hub.example.com", extra=https)
    assert await opens(session_cookie, origin="http://hub.example.com", host="hub.example.com", extra=https)
