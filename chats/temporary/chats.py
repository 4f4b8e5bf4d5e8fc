"""Which chats are temporary, and the making and removing of their images."""

import contextlib
import logging
from datetime import timedelta

from django.utils import timezone
from redis.exceptions import RedisError

from chats.temporary import mirror
from chats.temporary.images import ChatGone, images
from chats.temporary.scope import current, inside
from chats.temporary.template import new_image
from hub.errors import HubError

log = logging.getLogger(__name__)


class TemporaryChatsUnavailable(HubError):
    code = "temporary_chats_unavailable"
    status = 503

    def __init__(self):
        super().__init__("Temporary chats are unavailable: the hub cannot reach Redis. Stored chats still work.")


class NotWrittenHere(HubError):
    """What a temporary chat does not write (shared memory, the shared index): its text stays out
    of the database. An agent's tool answers with the message."""

    status = 409

    def __init__(self, *, code: str, message: str):
        super().__init__(message)
        self.code = code


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


def exists(chat_id) -> bool:
    """Whether chat_id names a live temporary chat, anyone's (its rows say whose). False when
    Redis is away, so stored chats keep working."""
    if not chat_id:
        return False
    try:
        return images().version(str(chat_id)) is not None
    except RedisError:
        log.warning("could not look up a temporary chat", exc_info=True)
        return False


def chat_of_run(run_id) -> str | None:
    """The temporary chat a run belongs to, for URLs that name a run alone (None: a stored
    chat's run, or Redis away)."""
    try:
        return images().chat_of_run(str(run_id)) if run_id else None
    except RedisError:
        log.warning("could not look up a temporary chat's run", exc_info=True)
        return None


def note_new_run(sender, instance, created, **kwargs):
    """post_save of agents_app's Run: a run made inside a temporary chat is noted with its chat."""
    key = current()
    if created and key is not None:
        images().note_run(str(instance.pk), key)


def place_of(chat_id):
    """Where code about chat_id runs: inside its image for a temporary chat, else as it is."""
    return inside(chat_id) if exists(chat_id) else contextlib.nullcontext()


def owned(owner_id: int) -> list[str]:
    """The ids of the owner's live temporary chats, oldest first (none when Redis is away)."""
    try:
        return images().owned(owner_id)
    except RedisError:
        log.warning("could not list temporary chats", exc_info=True)
        return []


def is_temporary_chat(chat) -> bool:
    """Whether this Chat was read from a temporary chat's image."""
    return getattr(chat, "temporary", False) or current() == str(chat.pk)


def expires_at(chat):
    """When a temporary chat goes unless it changes again (None when Redis cannot say)."""
    try:
        seconds = images().ttl(str(chat.pk))
    except RedisError:
        return None
    return None if seconds is None else timezone.now() + timedelta(seconds=seconds)


def chats_of(owner_id: int) -> list:
    """The owner's live temporary chats, each read from its image and marked `temporary`."""
    from chats.models import Chat

    found = []
    for chat_id in owned(owner_id):
        try:
            with inside(chat_id):
                chat = Chat.objects.filter(pk=chat_id, owner_id=owner_id, deleted_at__isnull=True).first()
        except ChatGone:
            continue
        if chat is not None:
            chat.temporary = True
            found.append(chat)
    return found


def live_chats() -> list[str]:
    """Every live temporary chat, anyone's (for the sweeps that recover turns)."""
    try:
        return [key for _, key, alive in images().every_registered() if alive]
    except RedisError:
        log.warning("could not list temporary chats", exc_info=True)
        return []


def every_place():
    """Context managers for each place chats live: the database, then each temporary chat."""
    yield contextlib.nullcontext()
    for key in live_chats():
        yield inside(key)


def expire(*, on_expired) -> int:
    """Forget the temporary chats whose time ran out, calling on_expired(owner_id, chat_id) for
    each (to tell its tabs); returns how many."""
    store = images()
    expired = [(owner_id, key) for owner_id, key, alive in store.every_registered() if not alive]
    for owner_id, key in expired:
        on_expired(owner_id, key)
        store.forget(owner_id, key)
    return len(expired)


def remove(chat_id, *, owner_id: int) -> None:
    """Delete the chat's image at once."""
    store = images()
    store.delete(str(chat_id))
    store.forget(owner_id, str(chat_id))
