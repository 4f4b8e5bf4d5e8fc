"""What a stored file is called, how big it may be, and how it is shown.

A file's name comes from the user's machine and is shown back, never used as a path: storage
paths are the attachment's id (chats.models.attachment_path). Only the raster image types of
chats.attachments.reading.IMAGE_TYPES are ever shown inline; every other file downloads, and
nothing is served with a type a browser would run (HTML, SVG).
"""

import os
import re
import unicodedata
import uuid

from django.conf import settings
from django.db.models import Sum
from django.urls import reverse

from chats.attachments.reading import IMAGE_TYPES
from chats.models import Attachment

MB = 1024 * 1024
# The shared document search's label of passages read from files (keys "<file id>#<n>").
FILES_LABEL = "files"
NAME_CHARS = 200
FILES_PER_MESSAGE = 10
# Types a download is labelled with as they are; anything else goes out as bytes.
PLAIN_TYPES = frozenset({"application/pdf", "text/plain", "text/csv", "text/markdown", "application/json"})


def clean_name(name) -> str:
    """The last part of a path the browser sent, without control characters (NUL included), path
    separators or leading dots, at most NAME_CHARS long with its extension kept; "file" if
    nothing is left."""
    name = str(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = re.sub(r"\s+", " ", name).strip().lstrip(".").strip()
    if len(name) > NAME_CHARS:
        stem, extension = os.path.splitext(name)
        extension = extension[:20]
        name = stem[: NAME_CHARS - len(extension)].rstrip() + extension
    return name or "file"


def uuid_or_none(value: str):
    """A file id as given (a form, a search key), or None when it is not one."""
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def max_upload_bytes() -> int:
    return int(settings.HUB_MAX_UPLOAD_MB * MB)


def user_storage_bytes() -> int:
    return int(settings.HUB_USER_STORAGE_MB * MB)


def storage_used(owner) -> int:
    """Bytes of every file the user keeps."""
    return Attachment.objects.filter(owner=owner).aggregate(total=Sum("size"))["total"] or 0


def megabytes(size: int) -> str:
    """A size as a person reads it: 10 KB, 2.5 MB, 1,024 MB."""
    if size < MB:
        return f"{round(size / 1024):,} KB"
    value = size / MB
    return f"{value:,.1f} MB" if value < 10 else f"{value:,.0f} MB"


def shown_inline(content_type: str) -> bool:
    return content_type in IMAGE_TYPES


def served_type(content_type: str) -> str:
    """The Content-Type a download is sent with: an image or a plain type as it is, everything
    else (HTML, SVG, scripts, office files) as bytes, so no browser renders or runs it."""
    if content_type in IMAGE_TYPES or content_type in PLAIN_TYPES:
        return content_type
    return "application/octet-stream"


def file_payload(attachment) -> dict:
    """A file as the page, the API and a message's data show it (no storage path)."""
    return {
        "id": str(attachment.pk),
        "chat_id": str(attachment.chat_id),
        "message_id": attachment.message_id,
        "name": attachment.name,
        "content_type": attachment.content_type,
        "size": attachment.size,
        "image": shown_inline(attachment.content_type),
        "text_status": attachment.text_status,
        "text_note": attachment.text_note,
        "pages": attachment.pages,
        "url": reverse("chats:file_download", args=[attachment.pk]),
    }
