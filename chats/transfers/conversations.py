"""A conversation read from another product's export, before it is stored: what ChatGPT's and
Claude's readers make of one entry, and the reason an entry is skipped."""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime


class SkipEntry(Exception):
    """One entry of an export cannot be imported; the message says why (the rest go on)."""


@dataclass
class ImportedMessage:
    role: str  # "user" or "assistant"
    content: str
    created_at: datetime | None = None
    data: dict = field(default_factory=dict)


@dataclass
class ImportedConversation:
    title: str
    created_at: datetime | None
    updated_at: datetime | None
    messages: list[ImportedMessage]


def clean_text(value: str) -> str:
    """Text as the databases take it: no NUL, no lone surrogate (either makes PostgreSQL refuse
    the row)."""
    text = value.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def unix_time(value, what: str) -> datetime | None:
    """ChatGPT's times: Unix seconds as a float (or none)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkipEntry(f"{what} is not a time in seconds")
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise SkipEntry(f"{what} is out of range") from None


def iso_time(value, what: str) -> datetime | None:
    """Claude's times: ISO 8601 text (or none)."""
    if value is None:
        return None
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        raise SkipEntry(f"{what} is not an ISO 8601 time")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def title_of(entry, key: str) -> str:
    """An entry's title for the report (never raises)."""
    value = entry.get(key) if isinstance(entry, dict) else None
    return " ".join(value.split())[:80] if isinstance(value, str) else ""
