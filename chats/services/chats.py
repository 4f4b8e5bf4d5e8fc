"""Writes to chats: create, change, members, delete, and the directory order (touch)."""

import contextlib
import re
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats import events
from chats.models import Chat, Membership
from chats.temporary import chats as temporary_chats
from hub.errors import InvalidInput

PREVIEW_CHARS = 200


def default_title(now=None) -> str:
    return f"Chat — {(now or timezone.now()).date().isoformat()}"


def _clean_text(value, *, field: str) -> str:
    """value stripped (None is empty); anything but text, a JSON number say, is refused."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput.for_field(field, "must be text")
    return value.strip()


def _clean_title(title: str, *, field: str = "title") -> str:
    title = _clean_text(title, field=field)
    if len(title) > settings.HUB_MAX_TITLE_CHARS:
        raise InvalidInput.for_field(field, f"at most {settings.HUB_MAX_TITLE_CHARS} characters")
    return title


def _clean_picture(picture) -> str:
    picture = _clean_text(picture, field="picture")
    limit = Chat._meta.get_field("picture").max_length
    if len(picture) > limit:
        raise InvalidInput.for_field("picture", f"at most {limit} characters")
    return picture


def _check_agent_usable(*, owner, agent) -> None:
    if agent.deleted_at is not None or (agent.owner_id is not None and agent.owner_id != owner.pk):
        # Another user's agent is "not found", never "forbidden".
        raise InvalidInput.for_field("agents", f"no agent {agent.pk}")


def members_payload(chat: Chat) -> list[dict]:
    # Only the columns shown: a whole agent row carries its prompt, settings and tools.
    rows = chat.memberships.order_by("added_at", "id").values_list(
        "agent_id", "agent__name", "agent__avatar", "agent__description", "agent__reply_policy", "agent__model",
        "agent__owner_id",
    )
    return [{"id": pk, "name": name, "avatar": avatar, "description": description, "reply_policy": policy,
             "model": model, "owned": owner_id == chat.owner_id}
            for pk, name, avatar, description, policy, model, owner_id in rows]


def _announce_chat_change(chat: Chat, *, change: str, members: bool = False) -> None:
    events.broadcast_on_commit(
        events.chat_group(chat.pk), events.chat_updated(chat, members=members_payload(chat) if members else None)
    )
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change=change))


def create_chat(*, owner, title: str = "", description: str = "", picture: str = "", agents=(),
                temporary: bool = False) -> Chat:
    """Create a chat owned by owner, with agents as members. Sends directory.updated.

    A temporary chat lives in an image of its own (chats.temporary), never in the database;
    code reaches it inside chats.temporary.scope.inside(chat.pk), like any other chat.

    Raises InvalidInput for a too-long title or picture, a field that is not text, or an agent the
    owner may not use; TemporaryChatsUnavailable when a temporary chat's store cannot be reached.
    """
    agents = list(agents)
    for agent in agents:
        _check_agent_usable(owner=owner, agent=agent)
    chat_id = uuid.uuid4()
    place = temporary_chats.new_chat(chat_id, owner_id=owner.pk) if temporary else contextlib.nullcontext()
    with place, transaction.atomic():
        return _create_chat_rows(chat_id, owner=owner, title=title, description=description, picture=picture,
                                 agents=agents)


def _create_chat_rows(chat_id, *, owner, title, description, picture, agents) -> Chat:
    chat = Chat.objects.create(
        id=chat_id,
        owner=owner,
        title=_clean_title(title) or default_title(),
        description=_clean_text(description, field="description"),
        picture=_clean_picture(picture),
    )
    Membership.objects.bulk_create([Membership(chat=chat, agent=agent) for agent in agents])
    events.broadcast_on_commit(events.user_group(owner.pk), events.directory_updated(chat, change="created"))
    return chat


@transaction.atomic
def update_chat(*, chat: Chat, title: str | None = None, description: str | None = None,
                picture: str | None = None) -> Chat:
    """Change a chat's title, description or picture. Sends chat.updated and directory.updated.

    Raises InvalidInput for a too-long title or picture, or a field that is not text."""
    if title is not None:
        chat.title = _clean_title(title) or chat.title
    if description is not None:
        chat.description = _clean_text(description, field="description")
    if picture is not None:
        chat.picture = _clean_picture(picture)
    chat.save(update_fields=["title", "description", "picture"])
    _announce_chat_change(chat, change="renamed")
    return chat


@transaction.atomic
def add_member(*, chat: Chat, agent) -> Membership:
    """Add agent to chat; adding a member again returns the existing membership."""
    _check_agent_usable(owner=chat.owner, agent=agent)
    membership, created = Membership.objects.get_or_create(chat=chat, agent=agent)
    if created:
        _announce_chat_change(chat, change="touched", members=True)
    return membership


@transaction.atomic
def remove_member(*, chat: Chat, agent) -> bool:
    """Remove agent from chat; returns whether it was a member."""
    deleted, _ = Membership.objects.filter(chat=chat, agent=agent).delete()
    if deleted:
        _announce_chat_change(chat, change="touched", members=True)
    return bool(deleted)


@transaction.atomic
def delete_chat(*, chat: Chat) -> Chat:
    """Soft-delete a chat and remove its memberships (a temporary chat is removed whole). Idempotent.

    Its open tabs get chat.deleted; the owner's tabs get directory.updated.
    """
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    if locked.deleted_at is not None:
        chat.deleted_at = locked.deleted_at
        return chat
    chat.deleted_at = timezone.now()
    chat.trashed_members = list(chat.memberships.order_by("added_at", "id").values_list("agent_id", flat=True))
    Chat.objects.filter(pk=chat.pk).update(deleted_at=chat.deleted_at, trashed_members=chat.trashed_members)
    chat.memberships.all().delete()
    events.broadcast_on_commit(events.chat_group(chat.pk), events.chat_deleted(chat))
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="deleted"))
    if temporary_chats.is_temporary_chat(chat):
        # No trash for a temporary chat: it goes at once.
        transaction.on_commit(lambda: temporary_chats.remove(chat.pk, owner_id=chat.owner_id))
    return chat


def preview_of(content: str) -> str:
    """A message as the sidebar previews it: its words on one line, without Markdown."""
    return " ".join(plain_text(content).split())[:PREVIEW_CHARS]


def plain_text(markdown: str) -> str:
    """Markdown's words without its markup: links and images keep their text; emphasis, code
    marks, headings, quotes and list bullets go."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"(?m)^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)", "", text)
    return re.sub(r"[*_`~]+", "", text)


def touch_chat(*, chat: Chat, preview: str | None = None, at=None) -> None:
    """Move the chat to the top of its owner's directory (and change its preview). New activity
    in an archived chat brings it back out of the archive."""
    chat.updated_at = at or timezone.now()
    fields = ["updated_at"]
    if chat.archived_at is not None:
        chat.archived_at = None
        fields.append("archived_at")
    if preview is not None:
        chat.last_message_preview = preview
        fields.append("last_message_preview")
    Chat.objects.filter(pk=chat.pk).update(**{f: getattr(chat, f) for f in fields})
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="touched"))




def trash_cutoff():
    return timezone.now() - timedelta(days=settings.HUB_TRASH_DAYS)


@transaction.atomic
def restore_chat(*, chat: Chat) -> Chat:
    """Bring a chat back from the trash (within HUB_TRASH_DAYS), with the members it had.

    Sends directory.updated (restored). Raises InvalidInput for a chat past the trash window.
    """
    chat = Chat.objects.select_for_update().get(pk=chat.pk)
    if chat.deleted_at is None:
        return chat
    if chat.deleted_at < trash_cutoff():
        raise InvalidInput.for_field("chat", f"deleted more than {settings.HUB_TRASH_DAYS} days ago")
    # chats knows agents only as members: the model is the membership's own relation's.
    agent_model = Membership._meta.get_field("agent").related_model
    members = agent_model.objects.filter(pk__in=chat.trashed_members, deleted_at__isnull=True)
    Membership.objects.bulk_create(
        [Membership(chat=chat, agent=a) for a in members if a.owner_id in (None, chat.owner_id)],
        ignore_conflicts=True,
    )
    chat.deleted_at = None
    chat.trashed_members = []
    chat.save(update_fields=["deleted_at", "trashed_members"])
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="restored"))
    return chat


def lock_live_chat(chat: Chat) -> None:
    """Take the chat's row lock, which orders concurrent sends and a delete: nothing lands in a
    chat once deleted. Call inside a transaction."""
    if Chat.objects.select_for_update().values_list("deleted_at", flat=True).get(pk=chat.pk) is not None:
        raise InvalidInput.for_field("chat", "this chat was deleted")


def lock_and_touch_live_chat(chat: Chat, *, at, preview: str | None = None) -> None:
    """lock_live_chat and touch_chat in one statement, for a message about to be stored at `at`.

    The UPDATE takes the row lock as the SELECT … FOR UPDATE did, and finds no row once the chat
    is deleted (a delete holding the lock is waited for, then seen). Every send and every turn's
    start does this, so one statement less is one less of each in a burst.
    """
    fields = {"updated_at": at, "archived_at": None}
    if preview is not None:
        fields["last_message_preview"] = preview
    if not Chat.objects.filter(pk=chat.pk, deleted_at__isnull=True).update(**fields):
        raise InvalidInput.for_field("chat", "this chat was deleted")
    for name, value in fields.items():
        setattr(chat, name, value)
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change="touched"))


@transaction.atomic
def purge_chat(*, chat: Chat) -> None:
    """Delete a chat for good: its threads, messages and runs go with it. Deleted chats only."""
    locked = Chat.objects.select_for_update().get(pk=chat.pk)
    if locked.deleted_at is None:
        raise InvalidInput.for_field("chat", "only a deleted chat can be purged")
    locked.delete()


def purge_expired_chats() -> int:
    """Purge every chat deleted more than HUB_TRASH_DAYS ago (the beat task calls this)."""
    purged = 0
    for chat in Chat.objects.filter(deleted_at__lt=trash_cutoff()).only("pk", "deleted_at"):
        purge_chat(chat=chat)
        purged += 1
    return purged
