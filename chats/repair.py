"""Repair checks of conversations: chat summaries and the search index (see hub.repair).

Finding is a read; fixing goes through chats.services.repairs.
"""

from datetime import timedelta

from django.db import connection
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Left
from django.urls import reverse
from django.utils import timezone

from chats import search, search_sql
from chats.models import Chat, Message
from chats.services import repairs
from chats.services.chats import preview_of
from hub.repair import Check, Finding

# A chat whose updated time is further ahead than this is "in the future" (clocks may differ a bit).
FUTURE_SLACK = timedelta(minutes=5)
# Enough of a message to make its preview, even with runs of whitespace collapsed.
PREVIEW_SOURCE_CHARS = 4000


def _short(text: str, size: int = 40) -> str:
    text = " ".join((text or "").split())
    return f"«{text if len(text) <= size else text[: size - 1] + '…'}»" if text else "(empty)"


def chat_label(chat) -> str:
    return f"chat {str(chat.pk)[:8]} {chat.title!r} ({chat.owner.get_username()})"


def _newest(field_source, **filters):
    rows = Message.objects.filter(chat=OuterRef("pk"), kind=Message.Kind.MESSAGE, **filters).order_by("-id")
    return Subquery(rows.values(field_source)[:1])


def find_chat_summary_drift() -> list[Finding]:
    """Live chats whose preview or updated time disagrees with their messages.

    The preview must be the text of the newest settled message, or of the newest message (what a
    fork keeps); the updated time may be later than the newest message (a reply settles after it
    was created) but not earlier, and not in the future.
    """
    newest_final = Message.objects.filter(chat=OuterRef("pk"), kind=Message.Kind.MESSAGE,
                                          status=Message.Status.FINAL).exclude(content="").order_by("-id")
    chats = (
        Chat.objects.filter(deleted_at__isnull=True).select_related("owner")
        .annotate(
            newest_at=_newest("created_at"),
            newest_text=Subquery(
                Message.objects.filter(chat=OuterRef("pk"), kind=Message.Kind.MESSAGE).order_by("-id")
                .annotate(head=Left("content", PREVIEW_SOURCE_CHARS)).values("head")[:1]
            ),
            newest_final_text=Subquery(newest_final.annotate(head=Left("content", PREVIEW_SOURCE_CHARS))
                                       .values("head")[:1]),
        )
        .order_by("pk")
    )
    future = timezone.now() + FUTURE_SLACK
    findings = []
    for chat in chats.iterator(chunk_size=500):
        expected = preview_of(chat.newest_final_text or "")
        problems = []
        if chat.last_message_preview not in {expected, preview_of(chat.newest_text or "")}:
            problems.append(f"preview shows {_short(chat.last_message_preview)} but the newest message says "
                            f"{_short(expected)}")
        if chat.newest_at is not None and chat.updated_at < chat.newest_at:
            problems.append(f"updated {chat.updated_at:%Y-%m-%d %H:%M:%S}, before its newest message "
                            f"({chat.newest_at:%Y-%m-%d %H:%M:%S}): it sorts too low in the directory")
        if chat.updated_at > future:
            problems.append(f"updated time {chat.updated_at:%Y-%m-%d %H:%M:%S} is in the future: it sticks to "
                            "the top of the directory")
        if problems:
            findings.append(Finding(
                check="chat_summaries", subject=chat_label(chat), problem="; ".join(problems),
                remedy="set the preview and updated time from its messages", target=chat,
                url=reverse("admin:chats_chat_change", args=[chat.pk]),
            ))
    return findings


def fix_chat_summary(finding: Finding) -> str:
    chat = repairs.resync_chat_summary(chat=finding.target)
    return f"preview is now {_short(chat.last_message_preview)}, updated {chat.updated_at:%Y-%m-%d %H:%M:%S}"


# --- The search index ------------------------------------------------------------------------

def _drift_findings() -> list[Finding]:
    """Search rows that disagree with their rows, as chats.search sees them (both databases)."""
    findings = []
    for line in search.index_drift(fix=False):
        table, _, detail = line.partition(": ")
        findings.append(Finding(check="search_index", subject=f"search rows of {table}",
                                problem=f"out of step with the rows ({detail})",
                                remedy="rebuild them from the rows", target="drift"))
    return findings


def _postgres_trigger_findings() -> list[Finding]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s)",
                       [sorted(search_sql.POSTGRES_MESSAGE_SEARCH_TRIGGERS)])
        missing = sorted(search_sql.POSTGRES_MESSAGE_SEARCH_TRIGGERS - {row[0] for row in cursor.fetchall()})
    if not missing:
        return []
    return [Finding(check="search_index", subject="search triggers",
                    problem=f"{len(missing)} missing ({', '.join(missing)}): new and edited messages are not indexed",
                    remedy="re-create the message search triggers, indexing every message again", target="triggers")]


def _postgres_index_findings() -> list[Finding]:
    wanted = [s.split(" IF NOT EXISTS ")[1].split(" ON ")[0] for s in search_sql.POSTGRES]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = ANY(%s)", [wanted],
        )
        present = dict(cursor.fetchall())
    findings = []
    for name in wanted:
        if name not in present:
            problem = "is missing: every search reads every row"
        elif not present[name]:
            problem = "is invalid (an interrupted build): searches do not use it"
        else:
            continue
        findings.append(Finding(check="search_index", subject=f"search index {name}", problem=problem,
                                remedy="build it again", target=name))
    return findings


def _sqlite_index_findings() -> list[Finding]:
    findings = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        missing = sorted(search_sql.SQLITE_TRIGGERS - {row[0] for row in cursor.fetchall()})
        if missing:
            findings.append(Finding(
                check="search_index", subject="search triggers",
                problem=f"{len(missing)} missing ({', '.join(missing[:3])}{'…' * (len(missing) > 3)}): "
                "new and edited messages are not indexed",
                remedy="re-create the search tables and their triggers, indexing every row again",
                target="triggers",
            ))
            return findings  # re-creating them rebuilds every table as well
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM chats_chat c LEFT JOIN chats_chat_fts f ON f.chat_id = c.id "
            "        WHERE f.chat_id IS NULL OR f.body IS NOT c.title || ' ' || c.description)"
            " + (SELECT COUNT(*) FROM chats_chat_fts f LEFT JOIN chats_chat c ON c.id = f.chat_id "
            "    WHERE c.id IS NULL)"
        )
        chat_drift = cursor.fetchone()[0]
    findings.extend(_drift_findings())
    if chat_drift:
        findings.append(Finding(check="search_index", subject="search rows of chats_chat",
                                problem=f"{chat_drift} chat titles are indexed wrongly or not at all",
                                remedy="rebuild them from the chats", target="chats_chat_fts"))
    return findings


def find_search_drift() -> list[Finding]:
    """Search rows out of step with their messages (what chats.search.index_drift finds), missing
    SQLite triggers or chat title rows, and missing or invalid PostgreSQL GIN indexes."""
    if connection.vendor == "postgresql":
        triggers = _postgres_trigger_findings()
        # Re-creating the triggers indexes every message again, which mends any drift as well.
        return _postgres_index_findings() + (triggers or _drift_findings())
    if connection.vendor == "sqlite":
        return _sqlite_index_findings()
    return []


def fix_search_drift(finding: Finding) -> str:
    if finding.target == "drift":
        if not search.index_drift(fix=True):
            return "already in step"
        return "rebuilt from the rows"
    repairs.rebuild_search_index(index=finding.target)
    return "rebuilt"


CHECKS = [
    Check("chat_summaries", "Chats whose preview or updated time disagrees with their messages",
          find_chat_summary_drift, fix_chat_summary,
          "The directory shows the chat with a preview or a time that does not match its newest message, "
          "or sorts it in the wrong place."),
    Check("search_index", "Search rows out of step with their messages", find_search_drift, fix_search_drift,
          "Search rows that no longer match their messages, missing search triggers, or a missing or broken "
          "index: searches miss messages, or find old text. Reads every message: the slowest check."),
]
