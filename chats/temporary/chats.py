"""Which chats are temporary, and the making and removing of their images."""

import contextlib
import logging

from redis.exceptions import RedisError

from chats.temporary import mirror
from chats.temporary.images import images
from chats.temporary.scope import inside
from chats.temporary.template import new_image
from hub.errors import HubError

log = logging.getLogger(__name__)


class TemporaryChatsUnavailable(HubError):
    code = "temporary_chats_unavailable"
    status = 503

    def __init__(self):
        super().__init__("Temporary chats are unavailable: the hub cannot reach Redis. Stored chats still work.")


@contextlib.contextmanager
def new_chat(chat_id, *, owner_id: int):
    """Make chat chat_id's image and run the block inside it; the block creates the chat's rows.
    The chat is the owner's once the block ends; if it raises, nothing of the chat is left."""
    key = str(chat_id)
    store = images()
    try:
        store.create(key, new_image())
    except RedisError as error:
        log.warning("could not make a temporary chat: %s", error)
        raise TemporaryChatsUnavailable() from error
    try:
        with inside(key):
            mirror.refresh(owner_id)
            yield
        store.register(owner_id, key)
    except BaseException:
        store.delete(key)
        raise


def is_temporary(chat_id, *, owner_id) -> bool:
    """Whether chat_id is one of the owner's live temporary chats. False when Redis is away, so
    stored chats keep working."""
    if owner_id is None or not chat_id:
        return False
    try:
        return images().owns(owner_id, str(chat_id))
    except RedisError:
        log.warning("could not look up temporary chats", exc_info=True)
        return False


def owned(owner_id: int) -> list[str]:
    """The ids of the owner's live temporary chats, oldest first (none when Redis is away)."""
    try:
        return images().owned(owner_id)
    except RedisError:
        log.warning("could not list temporary chats", exc_info=True)
        return []


def remove(chat_id, *, owner_id: int) -> None:
    """Delete the chat's image at once."""
    store = images()
    store.delete(str(chat_id))
    store.forget(owner_id, str(chat_id))
