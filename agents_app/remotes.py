"""Remotes: a user's MCP tool servers, attached to a thread and offered to its agents as tools.

A remote's headers are secret: stored encrypted (agents_app.secrets), they go only into the MCP
connection, never into a message, an event, a page or a log. A remote's URL is a user's, so its
connections go through agents_app.outbound, which keeps them off the hub's own network. Attaching
a remote writes a `resource` message (subkind remote) into the thread; resources are declarations,
never conversation, and no agent is notified of them.
"""

import logging
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from agents_app import outbound, secrets
from agents_app.models import Remote
from chats import services as chat_services
from chats.models import Message
from chats.temporary.scope import outside
from hub.errors import InvalidInput, NotFound

log = logging.getLogger(__name__)


def _check(name: str, url: str, headers) -> None:
    if not (name or "").strip() or len(name) > 100:
        raise InvalidInput.for_field("name", "must be 1 to 100 characters")
    try:
        parts = urlsplit(url or "")
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise InvalidInput.for_field("url", "is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 200:
        raise InvalidInput.for_field("url", "must be an http(s) URL of an MCP server, at most 200 characters")
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidInput.for_field("headers", "must be an object of text values")
    outbound.check_url(url, field="url")


@transaction.atomic
def create_remote(*, owner, name: str, url: str, headers: dict | None = None) -> Remote:
    """Save a remote; InvalidInput names the field (a private address is refused, see outbound)."""
    headers = headers or {}
    url = (url or "").strip()
    _check(name, url, headers)
    return Remote.objects.create(owner=owner, name=name.strip(), url=url,
                                 encrypted_headers=secrets.seal_headers(headers))


def headers_of(remote: Remote) -> dict[str, str]:
    """The remote's headers in clear, for its connection only ({} when they cannot be read)."""
    headers = secrets.open_headers(remote.encrypted_headers)
    if headers is None:
        log.warning("remote %s: its headers cannot be decrypted (SECRET_KEY changed?); calling without them",
                    remote.pk)
        return {}
    return headers


def header_names(remote: Remote) -> list[str]:
    return sorted(headers_of(remote))


def delete_remote(*, remote: Remote) -> None:
    remote.delete()


def remote_for_user(*, user, remote_id) -> Remote:
    try:
        return Remote.objects.get(owner=user, pk=int(remote_id))
    except (Remote.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such remote") from None


@transaction.atomic
def attach_remote(*, chat, remote: Remote, thread=None, new_thread_title: str | None = None) -> Message:
    """Declare the remote in the thread: a resource message its agents read as tools.

    With new_thread_title the declaration starts a new thread (the chat page attaches a remote
    before the thread's first message, so the first turn already has the tools).
    """
    if remote.owner_id != chat.owner_id:
        raise NotFound("no such remote")
    return chat_services.send_message(
        chat=chat, content=f"Remote: {remote.name}", thread=thread, new_thread_title=new_thread_title,
        kind=Message.Kind.RESOURCE, subkind="remote", format=Message.Format.TEXT,
        data={"remote_id": remote.pk, "name": remote.name},
    )


def remotes_for_thread(*, chat, messages) -> list[Remote]:
    """The owner's remotes declared in a thread, each once, in the order attached.

    messages: the thread's messages in id order (chats.selectors.thread_history), which a turn
    reads once for its conversation, notes and remotes.
    """
    ids = []
    for message in messages:
        if message.kind != Message.Kind.RESOURCE or message.subkind != "remote":
            continue
        remote_id = (message.data or {}).get("remote_id")
        if remote_id and remote_id not in ids:
            ids.append(remote_id)
    if not ids:  # most threads: no query at all
        return []
    with outside():  # the account's remotes, with their headers, even from a temporary chat
        remotes = {r.pk: r for r in Remote.objects.filter(owner_id=chat.owner_id, pk__in=ids)}
    return [remotes[i] for i in ids if i in remotes]


class RemoteUnreachable(Exception):
    """A remote could not be connected to; the text, for the user, names the remote and nothing
    of the network (no socket error, which would tell which ports of a host are open)."""

    def __init__(self, name: str):
        super().__init__(f"The remote tool server “{name}” could not be reached.")


def toolsets_for(remotes: list[Remote]) -> list:
    """pydantic-ai MCP toolsets for the remotes (streamable HTTP, with their secret headers)."""
    if not remotes:
        return []
    import httpx2
    from fastmcp.client import Client
    from fastmcp.client.transports import StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    def guarded_factory(**options):
        options.setdefault("timeout", httpx2.Timeout(30, read=300))
        return outbound.guarded_client(**options)

    class RemoteToolset(MCPToolset):
        remote_name = ""

        async def __aenter__(self):
            try:
                return await super().__aenter__()
            except Exception as exc:
                raise RemoteUnreachable(self.remote_name) from exc

    toolsets = []
    for remote in remotes:
        transport = StreamableHttpTransport(remote.url, headers=headers_of(remote) or None,
                                            httpx_client_factory=guarded_factory)
        toolset = RemoteToolset(Client(transport), id=f"remote-{remote.pk}")
        toolset.remote_name = remote.name
        toolsets.append(toolset)
    return toolsets


def mark_checked(remote: Remote, status: str) -> None:
    with outside():
        Remote.objects.filter(pk=remote.pk).update(last_checked_at=timezone.now(), status=status[:200])
