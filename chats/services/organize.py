"""Keeping chats in order: pins, the archive, folders (with instructions agents read) and tags,
the clean-up that archives idle chats, and branching a chat from one of its messages.

Every change is announced to all the owner's tabs: directory.updated for a chat (its payload
carries pinned_at, archived_at, folder_id and tags), folder.updated for a folder. A temporary chat
has no rows to keep in order: organizing one is a Conflict (save it first).
"""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from chats import events
from chats.models import Chat, Folder, Message, Tag
from chats.services.copies import fork_chat
from chats.temporary import chats as temporary_chats
from hub.errors import Conflict, InvalidInput

# A user pins at most this many chats: the directory's first page lists all of them, so their
# number bounds its cost.
MAX_PINNED = 50
MAX_FOLDERS = 200
MAX_TAGS_PER_CHAT = 20
FOLDER_INSTRUCTIONS_MAX_CHARS = 20_000
FOLDER_NAME_MAX_CHARS = Folder._meta.get_field("name").max_length
TAG_NAME_MAX_CHARS = Tag._meta.get_field("name").max_length
IDLE_BATCH = 500

# organize_chat's default for `folder`: leave the folder as it is (None means no folder).
KEEP = object()


def _clean_name(value, *, field: str, limit: int) -> str:
    """A folder's or tag's name: text, its runs of spaces made one, not empty, at most limit."""
    if not isinstance(value, str):
        raise InvalidInput.for_field(field, "must be text")
    name = " ".join(value.split())
    if not name:
        raise InvalidInput.for_field(field, "may not be empty")
    if len(name) > limit:
        raise InvalidInput.for_field(field, f"at most {limit} characters")
    return name


def _refuse_temporary(chat: Chat) -> None:
    if temporary_chats.is_temporary_chat(chat):
        raise Conflict("A temporary chat cannot be pinned, archived, filed or tagged: save it first.")


def _locked(chat: Chat) -> Chat:
    """The chat's row, locked and read again (with its tags), so concurrent changes queue."""
    _refuse_temporary(chat)
    fresh = Chat.objects.select_for_update().get(pk=chat.pk)
    prefetch_related_objects([fresh], "tags")
    return fresh


def _announce(chat: Chat, *, change: str) -> None:
    """directory.updated to the owner's tabs and chat.updated to the chat's, with the tags read
    again (the payload's tags are the ones prefetched)."""
    getattr(chat, "_prefetched_objects_cache", {}).pop("tags", None)
    prefetch_related_objects([chat], "tags")
    events.broadcast_on_commit(events.chat_group(chat.pk), events.chat_updated(chat))
    events.broadcast_on_commit(events.user_group(chat.owner_id), events.directory_updated(chat, change=change))


# --- Pins and the archive ------------------------------------------------------------------------

def _pin(chat: Chat, pinned: bool) -> str | None:
    if pinned == (chat.pinned_at is not None):
        return None
    if pinned:
        if chat.archived_at is not None:
            raise InvalidInput.for_field("pinned", "an archived chat cannot be pinned: restore it first")
        count = Chat.objects.filter(owner_id=chat.owner_id, pinned_at__isnull=False, deleted_at__isnull=True).count()
        if count >= MAX_PINNED:
            raise InvalidInput.for_field("pinned", f"at most {MAX_PINNED} pinned chats: unpin one first")
    chat.pinned_at = timezone.now() if pinned else None
    chat.save(update_fields=["pinned_at"])
    return "pinned" if pinned else "unpinned"


def _archive(chat: Chat, archived: bool) -> str | None:
    if archived == (chat.archived_at is not None):
        return None
    chat.archived_at = timezone.now() if archived else None
    if archived:
        chat.pinned_at = None  # an archived chat leaves the list, pin and all
    chat.save(update_fields=["archived_at", "pinned_at"])
    return "archived" if archived else "unarchived"


@transaction.atomic
def pin_chat(*, chat: Chat, pinned: bool = True) -> Chat:
    """Pin a chat to the head of the directory (pinned=False: unpin). Pinning again changes
    nothing. Sends directory.updated (pinned/unpinned). InvalidInput naming `pinned` past
    MAX_PINNED pins or for an archived chat; Conflict for a temporary chat."""
    chat = _locked(chat)
    change = _pin(chat, pinned)
    if change:
        _announce(chat, change=change)
    return chat


@transaction.atomic
def archive_chat(*, chat: Chat, archived: bool = True) -> Chat:
    """Archive a chat: it leaves the directory (and its pin) and stays searchable; archived=False
    restores it. Sends directory.updated (archived/unarchived). Conflict for a temporary chat."""
    chat = _locked(chat)
    change = _archive(chat, archived)
    if change:
        _announce(chat, change=change)
    return chat


def archive_idle_chats(*, now=None) -> int:
    """Archive every live, unpinned chat not updated for HUB_ARCHIVE_AFTER_DAYS days (empty or 0:
    never); returns how many. The beat task calls this. Owner by owner, along the directory's own
    index; a chat touched meanwhile is left as it is. Sends directory.updated (archived) each."""
    days = settings.HUB_ARCHIVE_AFTER_DAYS
    if not days:
        return 0
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    archived = 0
    for owner_id in get_user_model().objects.order_by("pk").values_list("pk", flat=True).iterator():
        while batch := _archive_idle_batch(owner_id=owner_id, cutoff=cutoff, now=now):
            archived += batch
    return archived


def _archive_idle_batch(*, owner_id, cutoff, now) -> int:
    idle = Chat.objects.filter(owner_id=owner_id, deleted_at__isnull=True, archived_at__isnull=True,
                               pinned_at__isnull=True, updated_at__lt=cutoff)
    with transaction.atomic():
        ids = list(idle.order_by("-updated_at", "-id").values_list("pk", flat=True)[:IDLE_BATCH])
        if not ids:
            return 0
        # The same conditions again: a chat touched since the read above stays.
        idle.filter(pk__in=ids).update(archived_at=now)
        group = events.user_group(owner_id)
        with events.batched():
            for chat in Chat.objects.filter(pk__in=ids, archived_at=now).prefetch_related("tags"):
                events.broadcast_on_commit(group, events.directory_updated(chat, change="archived"))
    return len(ids)


# --- Folders -------------------------------------------------------------------------------------

def clean_folder_name(value) -> str:
    return _clean_name(value, field="name", limit=FOLDER_NAME_MAX_CHARS)


def _clean_instructions(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput.for_field("instructions", "must be text")
    value = value.strip()
    if len(value) > FOLDER_INSTRUCTIONS_MAX_CHARS:
        raise InvalidInput.for_field("instructions", f"at most {FOLDER_INSTRUCTIONS_MAX_CHARS} characters")
    return value


def _check_name_free(*, owner_id, name: str, folder: Folder | None = None) -> None:
    same = Folder.objects.filter(owner_id=owner_id, name__iexact=name)
    if folder is not None:
        same = same.exclude(pk=folder.pk)
    if same.exists():
        raise InvalidInput.for_field("name", f"you already have a folder named “{name}”")


# The admin's form checks what the services would, before it saves.
clean_folder_instructions = _clean_instructions
check_folder_name_free = _check_name_free


def _save_folder(folder: Folder, **kwargs) -> None:
    try:
        with transaction.atomic():  # a savepoint: a name taken meanwhile is a clear 400, not a 500
            folder.save(**kwargs)
    except IntegrityError:
        raise InvalidInput.for_field("name", f"you already have a folder named “{folder.name}”") from None


@transaction.atomic
def create_folder(*, owner, name, instructions="") -> Folder:
    """A new folder of owner's. Sends folder.updated (created). InvalidInput naming `name` (empty,
    too long, or another folder's name in any case, or past MAX_FOLDERS) or `instructions`."""
    name = clean_folder_name(name)
    instructions = _clean_instructions(instructions)
    if Folder.objects.filter(owner=owner).count() >= MAX_FOLDERS:
        raise InvalidInput.for_field("name", f"at most {MAX_FOLDERS} folders: delete one first")
    _check_name_free(owner_id=owner.pk, name=name)
    folder = Folder(owner=owner, name=name, instructions=instructions)
    _save_folder(folder)
    events.broadcast_on_commit(events.user_group(owner.pk), events.folder_updated(folder, change="created"))
    return folder


@transaction.atomic
def update_folder(*, folder: Folder, name=None, instructions=None) -> Folder:
    """Rename a folder and/or set its instructions (what every agent in its chats reads from the
    next turn on). Sends folder.updated (renamed, or instructions). InvalidInput as create_folder."""
    changes = []
    if name is not None:
        name = clean_folder_name(name)
        if name != folder.name:
            _check_name_free(owner_id=folder.owner_id, name=name, folder=folder)
            folder.name = name
            changes.append("name")
    if instructions is not None:
        instructions = _clean_instructions(instructions)
        if instructions != folder.instructions:
            folder.instructions = instructions
            changes.append("instructions")
    if changes:
        _save_folder(folder, update_fields=changes)
        change = "renamed" if "name" in changes else "instructions"
        events.broadcast_on_commit(events.user_group(folder.owner_id), events.folder_updated(folder, change=change))
    return folder


@transaction.atomic
def delete_folder(*, folder: Folder) -> None:
    """Delete a folder; its chats stay, in no folder. Sends folder.updated (deleted): a tab takes
    the folder off the chats it shows."""
    events.broadcast_on_commit(events.user_group(folder.owner_id), events.folder_updated(folder, change="deleted"))
    folder.delete()


def _move(chat: Chat, folder: Folder | None) -> str | None:
    if folder is not None and folder.owner_id != chat.owner_id:
        raise InvalidInput.for_field("folder", f"no folder {folder.pk}")
    if chat.folder_id == (folder.pk if folder else None):
        return None
    chat.folder = folder
    chat.save(update_fields=["folder"])
    return "moved"


@transaction.atomic
def move_chat(*, chat: Chat, folder: Folder | None) -> Chat:
    """Put a chat in one of its owner's folders (None: out of any). Sends directory.updated
    (moved). InvalidInput naming `folder` for another user's folder; Conflict for a temporary chat."""
    chat = _locked(chat)
    change = _move(chat, folder)
    if change:
        _announce(chat, change=change)
    return chat


# --- Tags ----------------------------------------------------------------------------------------

def _tag_named(*, owner_id, name: str) -> Tag:
    """The owner's tag of that name (any case), made on first use."""
    tag = Tag.objects.filter(owner_id=owner_id, name__iexact=name).first()
    if tag is not None:
        return tag
    try:
        with transaction.atomic():
            return Tag.objects.create(owner_id=owner_id, name=name)
    except IntegrityError:  # made meanwhile by another request
        return Tag.objects.get(owner_id=owner_id, name=name)


def _drop_unused(tags) -> None:
    """Tags no chat carries any more go (the tag list stays the list of tags in use)."""
    Tag.objects.filter(pk__in=[t.pk for t in tags], chats__isnull=True).delete()


def _set_tags(chat: Chat, names: list) -> str | None:
    if not isinstance(names, list):
        raise InvalidInput.for_field("tags", "must be a list of tag names")
    wanted = {}
    for name in names:
        name = _clean_name(name, field="tags", limit=TAG_NAME_MAX_CHARS)
        wanted.setdefault(name.lower(), name)
    if len(wanted) > MAX_TAGS_PER_CHAT:
        raise InvalidInput.for_field("tags", f"at most {MAX_TAGS_PER_CHAT} tags on a chat")
    current = {t.name.lower(): t for t in chat.tags.all()}
    if set(current) == set(wanted):
        return None
    removed = [t for key, t in current.items() if key not in wanted]
    added = [_tag_named(owner_id=chat.owner_id, name=name) for key, name in wanted.items() if key not in current]
    chat.tags.remove(*removed)
    chat.tags.add(*added)
    _drop_unused(removed)
    return "tagged"


@transaction.atomic
def tag_chat(*, chat: Chat, name) -> Chat:
    """Put a tag on a chat by name (trimmed; the owner's tag of that name in any case, made on
    first use). Sends directory.updated (tagged). InvalidInput naming `tags` (empty, over
    TAG_NAME_MAX_CHARS, or past MAX_TAGS_PER_CHAT); Conflict for a temporary chat."""
    chat = _locked(chat)
    change = _set_tags(chat, [t.name for t in chat.tags.all()] + [name])
    if change:
        _announce(chat, change=change)
    return chat


@transaction.atomic
def untag_chat(*, chat: Chat, name) -> Chat:
    """Take a tag off a chat by name (any case); a tag no chat carries any more goes. Sends
    directory.updated (tagged) when the chat had it."""
    chat = _locked(chat)
    gone = name.strip().lower() if isinstance(name, str) else None
    change = _set_tags(chat, [t.name for t in chat.tags.all() if t.name.lower() != gone])
    if change:
        _announce(chat, change=change)
    return chat


@transaction.atomic
def delete_tag(*, tag: Tag) -> int:
    """Take a tag off every chat and delete it (the admin's repair); returns how many chats had it.
    Sends directory.updated (tagged) for each of its live chats."""
    chats = list(tag.chats.filter(deleted_at__isnull=True))
    tag.delete()
    with events.batched():
        for chat in chats:
            _announce(chat, change="tagged")
    return len(chats)


@transaction.atomic
def organize_chat(*, chat: Chat, pinned: bool | None = None, archived: bool | None = None, folder=KEEP,
                  tags: list | None = None) -> Chat:
    """Change any of a chat's pin, archive, folder (None: out of any) and tags (the whole list) at
    once, all or nothing. Sends one directory.updated naming the last change. Raises as
    pin_chat, archive_chat, move_chat and tag_chat."""
    chat = _locked(chat)
    changes = [
        _archive(chat, archived) if archived is not None else None,
        _pin(chat, pinned) if pinned is not None else None,
        _move(chat, folder) if folder is not KEEP else None,
        _set_tags(chat, tags) if tags is not None else None,
    ]
    done = [c for c in changes if c]
    if done:
        _announce(chat, change=done[-1])
    return chat


# --- Branching -----------------------------------------------------------------------------------

@transaction.atomic
def branch_chat(*, chat: Chat, at_message: Message) -> Chat:
    """"Branch from here": a new chat with everything up to and including at_message (fork_chat),
    in the same folder and with the same tags. Sends directory.updated (created). Raises as
    fork_chat (Conflict for a temporary chat)."""
    limit = settings.HUB_MAX_TITLE_CHARS - len(" (branch)")
    fork = fork_chat(chat=chat, at_message=at_message, title=f"{chat.title[:limit]} (branch)")
    fork.folder_id = chat.folder_id
    fork.save(update_fields=["folder"])
    fork.tags.set(chat.tags.all())
    _announce(fork, change="created")
    return fork
