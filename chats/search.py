"""Search over a user's hub: messages across all their chats, chat titles, the shared index.

One interface for every backend. Queries are free text: quotes, operators and unicode are taken
as words, never as syntax, so no query can raise. Deleted chats never show.
"""

import re
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from chats.models import Chat, Message, SharedDocument
from hub.errors import InvalidInput

MAX_TERMS = 12
SNIPPET_CHARS = 160


@dataclass
class Hit:
    chat_id: str
    chat_title: str
    thread_id: int | None
    message_id: int | None
    snippet: str
    rank: float

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def terms_of(query: str) -> list[str]:
    """The words of a query, lower-cased, without syntax; at most MAX_TERMS."""
    if not isinstance(query, str):
        return []
    return re.findall(r"\w+", query.lower())[:MAX_TERMS]


def _all_terms(field: str, terms: list[str]) -> Q:
    condition = Q()
    for term in terms:
        condition &= Q(**{f"{field}__icontains": term})
    return condition


def snippet(text: str, terms: list[str]) -> str:
    """A window of text around the first term, with the terms marked as [[term]]."""
    lowered = text.lower()
    first = min((lowered.find(t) for t in terms if t in lowered), default=0)
    start = max(0, first - SNIPPET_CHARS // 3)
    window = " ".join(text[start:start + SNIPPET_CHARS].split())
    for term in terms:
        window = re.sub(rf"(?i)({re.escape(term)})", r"[[\1]]", window)
    return ("…" if start else "") + window + ("…" if start + SNIPPET_CHARS < len(text) else "")


def _rank(text: str, terms: list[str]) -> float:
    lowered = text.lower()
    return float(sum(lowered.count(t) for t in terms)) / (1 + len(lowered) / 500)


def search_messages(*, owner, query: str, limit: int = 20, offset: int = 0, exclude_ids=(),
                    exclude_agent_id=None) -> list[Hit]:
    """Messages (and notes) across all the user's live chats, best first.

    exclude_ids and exclude_agent_id let an agent leave out the question it is answering and
    its own replies.
    """
    terms = terms_of(query)
    if not terms:
        return []
    rows = (
        Message.objects.filter(chat__owner=owner, chat__deleted_at__isnull=True,
                               kind__in=[Message.Kind.MESSAGE, Message.Kind.NOTE])
        .exclude(pk__in=list(exclude_ids))
        .exclude(sender_agent_id=exclude_agent_id)
        .filter(_all_terms("content", terms))
        .select_related("chat")
        .order_by("-id")[: 500]
    )
    hits = [Hit(str(m.chat_id), m.chat.title, m.thread_id, m.pk, snippet(m.content, terms), _rank(m.content, terms))
            for m in rows]
    hits.sort(key=lambda h: (-h.rank, -h.message_id))
    return hits[offset: offset + limit]


def search_chats(*, owner, query: str, limit: int = 20) -> list[Hit]:
    terms = terms_of(query)
    if not terms:
        return []
    condition = Q()
    for term in terms:
        condition &= Q(title__icontains=term) | Q(description__icontains=term)
    rows = Chat.objects.filter(owner=owner, deleted_at__isnull=True).filter(condition).order_by("-updated_at")[:limit]
    return [Hit(str(c.pk), c.title, None, None, snippet(f"{c.title} {c.description}", terms), 1.0) for c in rows]


@transaction.atomic
def index_shared(*, owner, label: str, key: str, content: str) -> SharedDocument:
    """Put content in the shared index under (label, key); re-indexing a key replaces it."""
    label, key = (label or "").strip(), (key or "").strip()
    if not label or len(label) > 100:
        raise InvalidInput.for_field("label", "must be 1 to 100 characters")
    if not key or len(key) > 300:
        raise InvalidInput.for_field("key", "must be 1 to 300 characters")
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput.for_field("content", "may not be empty")
    document, _ = SharedDocument.objects.update_or_create(
        owner=owner, label=label, key=key, defaults={"content": content}
    )
    return document


def search_shared(*, owner, label: str, query: str, limit: int = 10) -> list[dict]:
    terms = terms_of(query)
    if not terms:
        return []
    rows = SharedDocument.objects.filter(owner=owner, label=label).filter(_all_terms("content", terms))[:200]
    found = [{"key": d.key, "snippet": snippet(d.content, terms), "rank": _rank(d.content, terms)} for d in rows]
    return sorted(found, key=lambda d: -d["rank"])[:limit]
