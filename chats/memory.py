"""Shared memory: a user's context blocks, read by every chat's agents.

Writes: set (last writer wins) and append (atomic: the block row is locked, so appends from many
worker processes never lose one). Every write bumps the version and sends memory.updated to the
user's tabs. Each append keeps its provenance (chat, agent or the user, time) as a MemoryEntry.

From a temporary chat (chats.temporary) memory is read as it is in the database and not written:
what an agent learns there is not kept unless the user saves the chat.
"""

from django.db import transaction
from django.db.models import Prefetch

from chats import events
from chats.models import ContextBlock, MemoryEntry
from chats.temporary.chats import NotWrittenHere
from chats.temporary.scope import current, outside
from hub.errors import InvalidInput, NotFound
from hub.prepared import PreparedRead

DEFAULT_BLOCK = "memory"
TRIM_MARKER = "\n[… trimmed to fit]"
MAX_BLOCK_CHARS = 200_000


def _check_writable() -> None:
    if current() is not None:
        raise NotWrittenHere(code="memory_read_only", message=(
            "Not remembered: this is a temporary chat, where shared memory is read but not changed. "
            "It can be changed once the user saves the chat."))


def _clean_label(label: str) -> str:
    label = (label or "").strip()
    if not label or len(label) > 100:
        raise InvalidInput.for_field("label", "must be 1 to 100 characters")
    return label


def _clean_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput.for_field("content", "may not be empty")
    if len(text) > MAX_BLOCK_CHARS:
        raise InvalidInput.for_field("content", f"at most {MAX_BLOCK_CHARS} characters")
    return text.strip()


def blocks_for(*, owner):
    return ContextBlock.objects.filter(owner=owner).order_by("label")


def blocks_with_entries(*, owner):
    """The owner's blocks by label, each with its entries oldest first (one query for all entries)."""
    return blocks_for(owner=owner).prefetch_related(Prefetch("entries", MemoryEntry.objects.order_by("id")))


def block_with_entries(*, owner, label: str) -> ContextBlock:
    block = blocks_with_entries(owner=owner).filter(label=label).first()
    if block is None:
        raise NotFound("no such memory block")
    return block


def get_block(*, owner, label: str) -> ContextBlock | None:
    with outside():  # memory as it is now, from a temporary chat too
        return ContextBlock.objects.filter(owner=owner, label=label).first()


def block_for_user(*, owner, block_id) -> ContextBlock:
    try:
        return ContextBlock.objects.get(owner=owner, pk=int(block_id))
    except (ContextBlock.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such memory block") from None


def _locked_block(owner, label: str) -> ContextBlock:
    block, _ = ContextBlock.objects.get_or_create(owner=owner, label=label)
    return ContextBlock.objects.select_for_update().get(pk=block.pk)


def _rebuild(block: ContextBlock) -> None:
    block.content = "\n".join(block.entries.order_by("id").values_list("content", flat=True))
    block.version += 1
    block.save(update_fields=["content", "version", "updated_at"])
    events.broadcast_on_commit(events.user_group(block.owner_id), events.memory_updated(block))


@transaction.atomic
def append(*, owner, label: str = DEFAULT_BLOCK, text: str, chat=None, agent=None) -> ContextBlock:
    """Add text to the block (creating it), keeping where it came from. Atomic across processes.
    Raises NotWrittenHere from a temporary chat."""
    _check_writable()
    block = _locked_block(owner, _clean_label(label))
    MemoryEntry.objects.create(block=block, content=_clean_text(text), chat=chat, agent=agent)
    _rebuild(block)
    return block


@transaction.atomic
def set_content(*, owner, label: str = DEFAULT_BLOCK, content: str, chat=None, agent=None,
                description: str | None = None, max_tokens: int | None = None) -> ContextBlock:
    """Replace the block's content (last writer wins); an empty content empties it. Raises
    NotWrittenHere from a temporary chat."""
    _check_writable()
    block = _locked_block(owner, _clean_label(label))
    if description is not None:
        block.description = description.strip()[:500]
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or not 1 <= max_tokens <= 100_000:
            raise InvalidInput.for_field("max_tokens", "must be a whole number from 1 to 100000")
        block.max_tokens = max_tokens
    block.entries.all().delete()
    if isinstance(content, str) and content.strip():
        MemoryEntry.objects.create(block=block, content=_clean_text(content), chat=chat, agent=agent)
    block.save(update_fields=["description", "max_tokens"])
    _rebuild(block)
    return block


@transaction.atomic
def delete_entry(*, owner, entry_id) -> ContextBlock:
    try:
        entry = MemoryEntry.objects.select_related("block").get(pk=int(entry_id), block__owner=owner)
    except (MemoryEntry.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such memory entry") from None
    block = ContextBlock.objects.select_for_update().get(pk=entry.block_id)
    entry.delete()
    _rebuild(block)
    return block


def trimmed(block: ContextBlock) -> str:
    """The content an agent sees: cut to max_tokens (about four characters a token), with a marker."""
    limit = block.max_tokens * 4
    if len(block.content) <= limit:
        return block.content
    return block.content[: max(0, limit - len(TRIM_MARKER))] + TRIM_MARKER


def snapshot(*, owner) -> list[dict]:
    """The memory as an agent sees it at the start of a turn (frozen for that turn)."""
    with outside():  # memory as it is now, from a temporary chat too
        return [
            {"label": b.label, "description": b.description, "content": trimmed(b)}
            for b in OWNERS_BLOCKS.fetch(owner=getattr(owner, "pk", owner)) if b.content
        ]


# Read at every turn's start: its SQL is built once (hub.prepared).
OWNERS_BLOCKS = PreparedRead(lambda: ContextBlock.objects.order_by("label"), "owner")  # as blocks_for
