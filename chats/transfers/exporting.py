"""Exporting chats to a file: one chat, a folder's chats or all of them, as Hub JSON (with the
files sent in them, which imports back as an equal chat) or as Markdown. One chat is one .json
or .md file; more go in one .zip, a file per chat. The file is written to a temporary file a chat
at a time (one chat in memory at once) and then kept in storage for the owner to download."""

import json
import re
import tempfile
import time
import zipfile

from django.core.files import File

from chats import events
from chats.models import Chat, Transfer
from chats.services.copies import export_chat, export_markdown

EXTENSIONS = {"hub": "json", "markdown": "md"}
PROGRESS_SECONDS = 0.25


def chats_in_scope(transfer: Transfer):
    """The owner's stored chats the export covers (deleted ones never), oldest first."""
    chats = Chat.objects.filter(owner_id=transfer.owner_id, deleted_at__isnull=True)
    scope = transfer.scope or {}
    if "chat" in scope:
        chats = chats.filter(pk=scope["chat"])
    elif "folder" in scope:
        chats = chats.filter(folder_id=scope["folder"])
    return chats.order_by("created_at", "id")


def run_export(transfer: Transfer) -> None:
    """Write the export file and keep it on the transfer (an export run again starts over)."""
    ids = list(chats_in_scope(transfer).values_list("pk", flat=True))
    transfer.total, transfer.done = len(ids), 0
    Transfer.objects.filter(pk=transfer.pk).update(total=transfer.total, done=0)
    tell = _teller(transfer)
    extension = EXTENSIONS[transfer.format]
    with tempfile.TemporaryFile(prefix="hub-export-") as out:
        if len(ids) == 1:
            chat = Chat.objects.get(pk=ids[0])
            out.write(_rendered(chat, transfer.format))
            name = f"{_slug(chat.title)}.{extension}"
            _advance(transfer, tell)
        else:
            with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                for number, chat_id in enumerate(ids, start=1):
                    chat = Chat.objects.filter(pk=chat_id, deleted_at__isnull=True).first()
                    if chat is not None:  # deleted while the export ran
                        archive.writestr(f"chats/{number:04d}-{_slug(chat.title)}.{extension}",
                                         _rendered(chat, transfer.format))
                    _advance(transfer, tell)
            name = f"hub-chats-{transfer.created_at:%Y-%m-%d}.zip"
        out.seek(0)
        if transfer.file:
            transfer.file.delete(save=False)
        transfer.file.save(name, File(out), save=False)
    transfer.name = name
    transfer.report = {"exported": transfer.done, "size": transfer.file.size}
    Transfer.objects.filter(pk=transfer.pk).update(file=transfer.file.name, name=name, report=transfer.report)


def _rendered(chat: Chat, fmt: str) -> bytes:
    if fmt == "markdown":
        return export_markdown(chat).encode("utf-8")
    return json.dumps(export_chat(chat), ensure_ascii=False).encode("utf-8")


def _advance(transfer: Transfer, tell) -> None:
    transfer.done += 1
    Transfer.objects.filter(pk=transfer.pk).update(done=transfer.done)
    tell()


def _teller(transfer: Transfer):
    sent = [0.0]

    def tell():
        now = time.monotonic()
        if now - sent[0] >= PROGRESS_SECONDS or transfer.done == transfer.total:
            sent[0] = now
            events.broadcast_now(events.user_group(transfer.owner_id), events.transfer_updated(transfer))
    return tell


def _slug(title: str) -> str:
    """A file name from a title: letters, digits and dashes, never empty, never a path."""
    slug = re.sub(r"[^\w]+", "-", title, flags=re.UNICODE).strip("-_").lower()[:60]
    return slug or "chat"
