"""Files in chats: storing an upload, attaching files to the message they are sent with,
reading their text, and removing one.

An upload is stored at once (so a long one shows progress and a send does not wait for it) and
belongs to its chat with no message until a send names it. Its bytes go to Django's storage in
chunks from the temporary file Django wrote while the request arrived; the row and the bytes
are kept together: bytes whose row could not be stored are removed, and a row deleted by any
path (a purged chat, a deleted user) takes its passages and, once that commits, its bytes
(delete_stored_file). Its text is read by a Celery task sent when the upload commits
(read_file_text), in a child process with a time and a memory limit.
"""

import contextlib
import tempfile

from django.db import transaction

from chats import events
from chats.attachments import files, reader_process
from chats.attachments.reading import Unreadable, sniff, split_passages
from chats.models import Attachment, Chat, Message, SharedDocument
from chats.services.chats import lock_live_chat
from chats.temporary import chats as temporary_chats
from hub.celery import app
from hub.errors import InvalidInput, TooLarge

SNIFF_BYTES = 8192
READ_FILE_TASK = "chats.read_file"


def check_upload_size(*, owner, size: int, name: str) -> None:
    """TooLarge (413) for a file over HUB_MAX_UPLOAD_MB, or one its owner has no room left for."""
    limit = files.max_upload_bytes()
    if size > limit:
        raise TooLarge(f"{name} is {files.megabytes(size)}: a file may be at most {files.megabytes(limit)}.",
                       fields={"file": [f"at most {files.megabytes(limit)}"]})
    quota, used = files.user_storage_bytes(), files.storage_used(owner)
    if used + size > quota:
        raise TooLarge(f"{name} does not fit: your files use {files.megabytes(used)} of {files.megabytes(quota)}.",
                       fields={"file": [f"{files.megabytes(max(0, quota - used))} left of {files.megabytes(quota)}"]})


def upload_file(*, chat: Chat, upload) -> Attachment:
    """Store an uploaded file (a Django UploadedFile) in the chat, not yet attached to a message.

    Raises TooLarge for a file over a limit and InvalidInput for a deleted or temporary chat;
    nothing is stored then. The type comes from the file's first bytes, not its name. The bytes
    are stored first and removed again if the row cannot be.
    """
    if temporary_chats.is_temporary_chat(chat):
        raise InvalidInput.for_field("file", "a temporary chat keeps no files: save the chat first")
    name = files.clean_name(upload.name)
    check_upload_size(owner=chat.owner, size=upload.size, name=name)
    upload.seek(0)
    head = upload.read(SNIFF_BYTES)
    upload.seek(0)
    attachment = Attachment(owner=chat.owner, chat=chat, name=name, content_type=sniff(head, name), size=upload.size)
    if files.shown_inline(attachment.content_type):  # an image has no text to read
        attachment.text_status, attachment.text_note = Attachment.TextStatus.UNREADABLE, "an image: no text to read"
    attachment.file.save(name, upload, save=False)
    try:
        with transaction.atomic():
            lock_live_chat(chat)
            attachment.save()
            if attachment.text_status == Attachment.TextStatus.PENDING:
                transaction.on_commit(lambda: app.send_task(READ_FILE_TASK, args=[str(attachment.pk)],
                                                            ignore_result=True))
    except BaseException:
        attachment.file.storage.delete(attachment.file.name)
        raise
    return attachment


def read_file_text(*, file_id: str) -> str:
    """Read a stored file's text off the request path (the read_file task) and index its
    passages in the owner's shared document search (label files.FILES_LABEL, key "<file id>#<n>"), so
    search and agents find it with its file; the chat's tabs hear of each step (file.updated).
    A file already read, or gone, is left alone; one left "reading" by a dead worker is read again.
    Returns the status it ended in. Raises reader_process.ReadersBusy, with the file still
    pending, when this process already reads as many files as it may (HUB_FILE_READS_AT_ONCE)."""
    attachment = Attachment.objects.filter(pk=file_id).select_related("owner").first()
    if attachment is None or attachment.text_status in (Attachment.TextStatus.READ, Attachment.TextStatus.UNREADABLE):
        return attachment.text_status if attachment else "gone"
    # The slot is held until the file is marked read, so no more files are "reading" than slots.
    with reader_process.reader_slot():
        return _read_and_index(attachment)


def _read_and_index(attachment: Attachment) -> str:
    _note_reading(attachment, status=Attachment.TextStatus.READING, pages=0)
    try:
        with local_copy(attachment) as path:
            reading = reader_process.read_in_child(
                path, attachment.content_type, progress=lambda pages: _note_reading(attachment, pages=pages))
    except Unreadable as exc:
        _finish_reading(attachment, status=Attachment.TextStatus.UNREADABLE, note=str(exc)[:300])
        return attachment.text_status
    passages = split_passages(reading.text)
    with transaction.atomic():
        _forget_passages(attachment)
        SharedDocument.objects.bulk_create([  # the search indexes follow (GIN index, FTS5 triggers)
            SharedDocument(owner=attachment.owner, label=files.FILES_LABEL, key=f"{attachment.pk}#{number}",
                           content=f"[{attachment.name}{f', page {page}' if reading.pages > 1 else ''}]\n{text}")
            for number, (page, text) in enumerate(passages, start=1)])
        _finish_reading(attachment, status=Attachment.TextStatus.READ, pages=reading.pages, note=reading.stopped)
    return attachment.text_status


@contextlib.contextmanager
def local_copy(attachment: Attachment):
    """A path on this machine to the file's bytes: its own path on a local storage, else a
    temporary copy made in chunks (an S3 bucket)."""
    try:
        yield attachment.file.path
        return
    except NotImplementedError:
        pass
    with tempfile.NamedTemporaryFile(prefix="hub-file-") as copy:
        with attachment.file.open("rb") as stored:
            for chunk in stored.chunks():
                copy.write(chunk)
        copy.flush()
        yield copy.name


def _note_reading(attachment: Attachment, *, pages: int, status: str | None = None) -> None:
    attachment.pages, attachment.text_status = pages, status or attachment.text_status
    Attachment.objects.filter(pk=attachment.pk).update(pages=pages, text_status=attachment.text_status)
    events.broadcast_now(events.chat_group(attachment.chat_id), events.file_updated(attachment))


def _finish_reading(attachment: Attachment, *, status: str, note: str, pages: int | None = None) -> None:
    attachment.text_status, attachment.text_note = status, note
    if pages is not None:
        attachment.pages = pages
    Attachment.objects.filter(pk=attachment.pk).update(text_status=status, text_note=note, pages=attachment.pages)
    events.broadcast_on_commit(events.chat_group(attachment.chat_id), events.file_updated(attachment))


def _forget_passages(attachment: Attachment) -> None:
    SharedDocument.objects.filter(owner=attachment.owner_id, label=files.FILES_LABEL,
                                  key__startswith=f"{attachment.pk}#").delete()


@transaction.atomic
def remove_unsent_file(*, attachment: Attachment) -> None:
    """A file taken off the composer before it was sent is deleted (a sent one stays with its
    message)."""
    if attachment.message_id is not None:
        raise InvalidInput.for_field("file", "this file was sent with a message and stays with it")
    attachment.delete()


@transaction.atomic
def delete_file(*, attachment: Attachment) -> None:
    """Delete any file (staff): its message keeps its text and no longer lists the file."""
    message = attachment.message
    if message is not None:
        listed = [f for f in (message.data or {}).get("files", []) if f.get("id") != str(attachment.pk)]
        message.data = {**message.data, "files": listed}
        message.save(update_fields=["data"])
    attachment.delete()


def attach_files(*, message: Message, file_ids) -> list[Attachment]:
    """Give the message the chat's unsent files named by file_ids (in that order). Call inside the
    send's transaction, after the chat's row lock. InvalidInput names the field for an unknown id,
    another chat's file or one already sent."""
    if not isinstance(file_ids, list) or not all(isinstance(i, str) for i in file_ids):
        raise InvalidInput.for_field("files", "must be a list of file ids")
    if len(file_ids) > files.FILES_PER_MESSAGE:
        raise InvalidInput.for_field("files", f"at most {files.FILES_PER_MESSAGE} files per message")
    wanted = [files.uuid_or_none(i) for i in file_ids]
    if len(set(wanted)) != len(wanted):
        raise InvalidInput.for_field("files", "a file is named twice")
    found = {a.pk: a for a in Attachment.objects.select_for_update().filter(
        pk__in=[i for i in wanted if i], chat=message.chat_id, message__isnull=True)}
    missing = [given for given, i in zip(file_ids, wanted, strict=True) if i not in found]
    if missing:
        raise InvalidInput.for_field("files", f"no unsent file {missing[0][:40]} in this chat")
    attached = [found[i] for i in wanted]
    Attachment.objects.filter(pk__in=[a.pk for a in attached]).update(message=message)
    for attachment in attached:
        attachment.message = message
    return attached


def delete_stored_file(sender, instance: Attachment, **kwargs) -> None:
    """post_delete of Attachment: its passages go with it, its bytes once the deletion commits
    (not before: a rolled back delete keeps its file)."""
    _forget_passages(instance)
    name, storage = instance.file.name, instance.file.storage
    if name:
        transaction.on_commit(lambda: storage.delete(name))
