"""Which page may open a websocket: the hub's own origin, exactly, or one the operator trusts.

A browser sends the user's cookies with every websocket it opens, whichever page opens it, and
the same-origin policy does not cover websockets. So the Origin header is the only thing that
tells the hub's own pages from another site's, or from another web app on the same machine
(`http://127.0.0.1:8080` is a different origin from `http://127.0.0.1:8000`). Channels'
AllowedHostsOriginValidator compares only the host, so it let those in; this compares scheme,
host and port, as the browser itself does for every other request.

An Origin is accepted when it equals the origin the hub is being reached at — the Host header
(which must be in ALLOWED_HOSTS: that stops DNS rebinding, where a foreign name points at the
hub and Origin and Host agree), with `https` for a secure socket and `http` otherwise — or when
it is listed in CSRF_TRUSTED_ORIGINS, the same list Django's CSRF check trusts for forms.
A socket without an Origin is refused: browsers always send one, and programs use the REST API.
"""

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]  # (scheme, host, port), lower case, the port always filled in


def parse_origin(value: str) -> Origin | None:
    """An http(s) origin as (scheme, host, port); None for anything else (`null`, a path, junk)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _allowed_hosts() -> list[str]:
    # The same fallback Django's request.get_host() uses for a development server.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return settings.ALLOWED_HOSTS


def request_scheme(scope, headers: dict[bytes, bytes]) -> str:
    """http or https: how the browser reached the hub, so the scheme its page's Origin has."""
    if settings.HUB_BEHIND_PROXY:
        # The proxy ends TLS and says so; the first value is the one the client used.
        forwarded = headers.get(b"x-forwarded-proto", b"").decode("latin1").split(",")[0].strip().lower()
        if forwarded in DEFAULT_PORTS:
            return forwarded
    if scope.get("scheme") in ("wss", "https"):
        return "https"
    # Daphne leaves the scheme out of a websocket's scope even when it serves TLS itself; a hub
    # that is HTTPS-only serves no plain pages that could open a socket.
    return "https" if settings.HUB_HTTPS else "http"


def hub_origin(scope, headers: dict[bytes, bytes]) -> Origin | None:
    """The origin the hub is reached at, from the Host header; None if the host is not allowed."""
    host = headers.get(b"host", b"").decode("latin1").strip().lower()
    domain, port = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    scheme = request_scheme(scope, headers)
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, domain.strip("[]"), number


def _trusted(origin: Origin) -> bool:
    """Listed in CSRF_TRUSTED_ORIGINS, where `https://*.example.com` trusts every subdomain."""
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "://*." in entry:
            base = parse_origin(entry.replace("://*.", "://", 1))
            if base and base[0] == scheme and base[2] == port and is_same_domain(host, "." + base[1]):
                return True
        elif parse_origin(entry) == origin:
            return True
    return False


def origin_allowed(scope) -> bool:
    """Whether a websocket handshake (an ASGI scope) comes from a page the hub trusts."""
    headers = dict(scope.get("headers") or [])
    raw = headers.get(b"origin")
    if raw is None:
        return False
    origin = parse_origin(raw.decode("latin1"))
    if origin is None:
        return False
    own = hub_origin(scope, headers)
    if own is None:
        return False
    return origin == own or _trusted(origin)


class SameOriginValidator:
    """ASGI middleware: a websocket from any other origin is closed before the consumer runs."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
