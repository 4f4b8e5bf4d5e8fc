"""Calls to addresses users typed (an agent's base URL, a remote's URL), kept off the hub's network.

A user could point an agent or a remote at the hub's own machine (loopback), the cloud's metadata
service (169.254.169.254) or another host of the private network, and read what answers, or
learn from the errors which ports are open. So such a host is resolved, and every address it
resolves to must be public: not loopback, link-local, private, shared (100.64/10), multicast,
reserved or unspecified, in IPv4 or IPv6, an IPv4 address carried inside an IPv6 one
(::ffff:a.b.c.d, 64:ff9b::/96, 2002::/16) included. The operator may allow more with
HUB_OUTBOUND_ALLOW (hosts or CIDRs); the hosts of the environment's own provider base URLs are
the operator's choice and always allowed, so a local Ollama keeps working. Staff may let a shared
agent reach private addresses (Agent.allow_private_network, in the admin).

The check runs twice: when the address is saved (check_url: a clear error on the field), and on
every connection (GuardedTransport). The connection goes to the very address that was checked,
so a DNS answer that changes in between (rebinding) or a redirect to a private address gets
nowhere. A connection refused at that point fails like an unreachable server: the user learns
nothing about the hub's network from it.
"""

import asyncio
import ipaddress
import logging
import os
import socket
from urllib.parse import urlsplit

import httpx2
from django.conf import settings

from hub.errors import InvalidInput

log = logging.getLogger(__name__)

ENVIRONMENT_URLS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_BASE_URL")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(httpx2.ConnectError):
    """A connection to a non-public address; the SDKs report it as an unreachable server."""


class Unresolvable(OutboundRefused):
    """The host stands for no address at all."""


def is_public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour or (
            ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in NAT64 else None)
        if carried is not None:
            return is_public(carried)
    return address.is_global and not address.is_multicast


def _operator_allows() -> tuple[set[str], list]:
    """(host names, networks) allowed besides public addresses."""
    hosts = {urlsplit(os.environ.get(name, "").strip()).hostname for name in ENVIRONMENT_URLS} - {None}
    networks = []
    for entry in settings.HUB_OUTBOUND_ALLOW:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            hosts.add(entry.lower())
    return {h.lower() for h in hosts}, networks


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[Address]:
    """Every address the host stands for (the host itself when it is an address); [] if unknown."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def vet(host: str, port: int, *, allow_private: bool = False) -> Address | None:
    """The address to connect to for host, or None to connect by name (a host allowed by name).

    Raises OutboundRefused when the host stands for a non-public address the operator has not
    allowed, or resolves to nothing.
    """
    hosts, networks = _operator_allows()
    if host.lower().strip("[]") in hosts:
        return None
    addresses = resolve(host, port)
    if not addresses:
        raise Unresolvable(f"{host} could not be resolved")
    for address in addresses:
        if not (allow_private or is_public(address) or any(address in n for n in networks)):
            log.warning("refused an outbound call to %s (%s): not a public address", host, address)
            raise OutboundRefused(f"{host} is not a public address")
    return addresses[0]


def check_url(url: str, *, field: str, allow_private: bool = False) -> None:
    """Raise InvalidInput for field when url leads to an address this hub may not call.

    A host that does not resolve now passes: nothing can be reached there yet, and every
    connection is checked again when it is made.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        vet(host, port, allow_private=allow_private)
    except Unresolvable:
        return
    except OutboundRefused:
        raise InvalidInput.for_field(
            field, f"points to a private or local address ({host}), which this hub does not call; "
                   "the operator can allow it with HUB_OUTBOUND_ALLOW") from None
    except ValueError:
        raise InvalidInput.for_field(field, "is not a valid URL") from None


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport that vets every request's host and connects to the address it vetted."""

    def __init__(self, *, allow_private: bool = False):
        self.allow_private = allow_private
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        host, port = url.host, url.port or (443 if url.scheme == "https" else 80)
        try:
            # getaddrinfo blocks: it runs on the loop's executor, not on the loop.
            address = await asyncio.get_running_loop().run_in_executor(
                None, lambda: vet(host, port, allow_private=self.allow_private))
        except OutboundRefused as exc:
            raise type(exc)(str(exc), request=request) from None
        if address is not None:
            # The Host header keeps the name; TLS checks the certificate against it (SNI).
            request.url = url.copy_with(host=str(address))
            if url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(*, allow_private: bool = False, **options) -> httpx2.AsyncClient:
    """An httpx2 client for a user-typed URL (a provider SDK's or an MCP connection's)."""
    options.setdefault("timeout", httpx2.Timeout(600, connect=5))
    return httpx2.AsyncClient(transport=GuardedTransport(allow_private=allow_private), **options)
