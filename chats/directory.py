"""Reads of the directory: a page of the user's chats (pinned first; filtered by folder, tag,
archive or trash), and the user's folders and tags.

Every page costs the same few queries whatever the number of chats: the pinned chats (first page
only, at most chats.services.organize.MAX_PINNED, along chat_pinned), one page of the rest by cursor
along an index (chat_owner_live, which holds only the live, unpinned, unarchived chats;
chat_folder_updated; chat_archived), and the page's tags in one more.
"""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.conf import settings
from django.db.models import Q, prefetch_related_objects

from chats.models import Chat, Folder, Tag
from chats.temporary import chats as temporary_chats
from chats.temporary.scope import outside
from hub.errors import InvalidInput, NotFound

DIRECTORY_SEARCH_MAX_CHARS = 500


@dataclass
class DirectoryPage:
    chats: list
    next_cursor: str | None


def encode_cursor(chat: Chat, *, archived: bool = False) -> str:
    moment = chat.archived_at if archived else chat.updated_at
    return f"{moment.isoformat()}_{chat.pk}"


def decode_cursor(cursor: str):
    """(time, id) of a directory cursor; InvalidInput naming `before` if it does not parse."""
    try:
        stamp, _, chat_id = cursor.rpartition("_")
        moment = datetime.fromisoformat(stamp)
        if moment.tzinfo is None:
            raise ValueError("no time zone")
        return moment, UUID(chat_id)
    except (ValueError, AttributeError, TypeError):
        raise InvalidInput.for_field("before", "is not a cursor this list gave out") from None


def folder_for_user(*, user, folder_id, field: str | None = None) -> Folder:
    """The user's folder with that id. Another user's, a missing or a malformed id is NotFound, or
    InvalidInput naming `field` when the id came in a body's field."""
    try:
        return Folder.objects.get(owner=user, pk=int(folder_id))
    except (Folder.DoesNotExist, ValueError, TypeError, OverflowError):
        if field:
            raise InvalidInput.for_field(field, f"no folder {folder_id}") from None
        raise NotFound("no such folder") from None


def folders_for_user(*, user) -> list[Folder]:
    """The user's folders by name."""
    return list(Folder.objects.filter(owner=user).order_by("name", "id"))


def tag_for_user(*, user, name) -> Tag:
    """The user's tag of that name (any case); another user's or an unknown name is NotFound."""
    name = " ".join(name.split()) if isinstance(name, str) else ""
    # Longer than any tag's name can be is none of them (and SQLite refuses a huge LIKE pattern).
    if not name or len(name) > Tag._meta.get_field("name").max_length:
        raise NotFound("no such tag")
    tag = Tag.objects.filter(owner=user, name__iexact=name).first()
    if tag is None:
        raise NotFound("no such tag")
    return tag


def tags_for_user(*, user) -> list[dict]:
    """The user's tags by name, each with the number of its live chats."""
    from django.db.models import Count

    rows = (Tag.objects.filter(owner=user).order_by("name", "id")
            .annotate(chat_count=Count("chats", filter=Q(chats__deleted_at__isnull=True))))
    return [{"id": t.pk, "name": t.name, "chat_count": t.chat_count} for t in rows]


def folder_instructions(*, chat: Chat) -> str:
    """The instructions of the folder the chat is in ("" without a folder): every agent in the
    chat reads them."""
    if not chat.folder_id:
        return ""
    with outside():
        # A saved chat's folder is a row of the database, not of a temporary chat's image.
        return Folder.objects.filter(pk=chat.folder_id).values_list("instructions", flat=True).first() or ""


def directory_page(*, user, limit: int = 50, before: str | None = None, search: str = "", trash: bool = False,
                   archived: bool = False, folder: Folder | None = None, tag: Tag | None = None) -> DirectoryPage:
    """A page of the user's chat summaries; `before` is the cursor of the last page.

    The live chats come newest first, the pinned ones (most recently pinned first) ahead of the
    first page and not again below. trash=True lists the deleted chats still within the trash
    window instead; archived=True the archived chats, most recently archived first. folder and tag
    (the caller's own, from folder_for_user and tag_for_user) keep the chats in that folder or with
    that tag. InvalidInput names `limit`, `before` or `q` (a search over DIRECTORY_SEARCH_MAX_CHARS
    characters). The user's temporary chats are among the live ones when nothing filters the list.
    """
    if not isinstance(limit, int) or not 1 <= limit <= settings.DIRECTORY_PAGE_MAX:
        raise InvalidInput.for_field("limit", f"must be from 1 to {settings.DIRECTORY_PAGE_MAX}")
    if len(search) > DIRECTORY_SEARCH_MAX_CHARS:
        # As the API's ?q= (and SQLite refuses a LIKE pattern past 50 000 bytes).
        raise InvalidInput.for_field("q", f"at most {DIRECTORY_SEARCH_MAX_CHARS} characters")
    # Stored chats from the database, even when a temporary chat's page asks.
    with outside():
        return _directory_page(user=user, limit=limit, before=before, words=search.split()[:8], trash=trash,
                               archived=archived and not trash, folder=folder, tag=tag)


def _filtered(*, user, words: list[str], trash: bool, archived: bool, folder, tag):
    chats = Chat.objects.filter(owner=user)
    if trash:
        from chats.services import chats as chat_writes

        chats = chats.filter(deleted_at__gte=chat_writes.trash_cutoff())
    else:
        chats = chats.filter(deleted_at__isnull=True)
        chats = chats.filter(archived_at__isnull=False) if archived else chats.filter(archived_at__isnull=True)
    if folder is not None:
        chats = chats.filter(folder=folder)
    if tag is not None:
        chats = chats.filter(tags=tag)
    for word in words:
        chats = chats.filter(Q(title__icontains=word) | Q(description__icontains=word))
    return chats


def _directory_page(*, user, limit: int, before: str | None, words: list[str], trash: bool, archived: bool,
                    folder, tag) -> DirectoryPage:
    chats = _filtered(user=user, words=words, trash=trash, archived=archived, folder=folder, tag=tag)
    live_list = not trash and not archived
    pinned = []
    if live_list:
        if not before:
            from chats.services.organize import MAX_PINNED

            pinned = list(chats.filter(pinned_at__isnull=False).order_by("-pinned_at", "-id")[:MAX_PINNED])
        chats = chats.filter(pinned_at__isnull=True)
    stamp = "archived_at" if archived else "updated_at"
    if before:
        moment, chat_id = decode_cursor(before)
        chats = chats.filter(Q(**{f"{stamp}__lt": moment}) | Q(**{stamp: moment, "id__lt": chat_id}))
    rows = list(chats.order_by(f"-{stamp}", "-id")[: limit + 1])
    if live_list and folder is None and tag is None:
        rows = _with_temporary_chats(rows, user=user, words=words, before=before, limit=limit)
    page = rows[:limit]
    prefetch_related_objects([c for c in pinned + page if not temporary_chats.is_temporary_chat(c)], "tags")
    cursor = encode_cursor(page[-1], archived=archived) if len(rows) > limit else None
    return DirectoryPage(chats=pinned + page, next_cursor=cursor)


def _with_temporary_chats(rows: list, *, user, words: list[str], before: str | None, limit: int) -> list:
    """rows (stored chats, newest first) with the user's temporary chats among them, in the same
    order and past the same cursor: they are few, each read from its image."""
    temporary = temporary_chats.chats_of(user.pk)
    if not temporary:
        return rows
    if before:
        moment, chat_id = decode_cursor(before)
        temporary = [c for c in temporary if (c.updated_at, str(c.pk)) < (moment, str(chat_id))]
    for word in (w.lower() for w in words):
        temporary = [c for c in temporary if word in c.title.lower() or word in c.description.lower()]
    merged = sorted([*rows, *temporary], key=lambda c: (c.updated_at, str(c.pk)), reverse=True)
    return merged[: limit + 1]
