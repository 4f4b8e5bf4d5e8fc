"""Import and export jobs (Transfer rows): starting one, and running it in a Celery worker.

A job is queued in one transaction with its row (and, for an import, the uploaded file kept in
storage) and its task is sent when that commits, as file reading is (chats.services.attachments):
the embedded hub runs it in its in-process worker, production in a worker process. The task
claims the row (queued -> running; a running one again after a worker died, going on from
transfer.done); the job ends done with its report, or failed with a clear error. Every change of
progress goes to the owner's tabs as transfer.updated. An import's upload is removed from storage
when the job ends; an export's file stays for the owner to download for HUB_EXPORT_KEEP_DAYS,
then the hourly beat task deletes it and the job says so.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats import events
from chats.attachments import files
from chats.models import Folder, Transfer
from chats.transfers import exporting, importing, sources
from hub.celery import app
from hub.errors import HubError, InvalidInput, TooLarge

log = logging.getLogger(__name__)

RUN_TRANSFER_TASK = "chats.run_transfer"
IMPORT_FORMATS = ("auto", *sources.FORMATS)
EXPORT_FORMATS = tuple(exporting.EXTENSIONS)


def max_import_bytes() -> int:
    return int(settings.HUB_MAX_IMPORT_MB * files.MB)


def start_import(*, owner, upload, format: str = "auto") -> Transfer:
    """Queue the import of an uploaded export (a Django UploadedFile). Raises InvalidInput naming
    the field for an unknown format, no file, or a file that is neither JSON nor a zip, and
    TooLarge over HUB_MAX_IMPORT_MB; nothing is kept then."""
    if format not in IMPORT_FORMATS:
        raise InvalidInput.for_field("format", f"must be one of {', '.join(IMPORT_FORMATS)}")
    if upload is None:
        raise InvalidInput.for_field("file", "choose the export file to import")
    limit = max_import_bytes()
    if upload.size > limit:
        raise TooLarge(f"The file is {files.megabytes(upload.size)}: an import may be at most "
                       f"{files.megabytes(limit)}.", fields={"file": [f"at most {files.megabytes(limit)}"]})
    upload.seek(0)
    sources.check_looks_like_export(upload.read(64))
    upload.seek(0)
    transfer = Transfer(owner=owner, kind=Transfer.Kind.IMPORT, format=format, name=files.clean_name(upload.name))
    transfer.file.save(transfer.name, upload, save=False)
    try:
        with transaction.atomic():
            transfer.save()
            _send_on_commit(transfer)
    except BaseException:
        transfer.file.storage.delete(transfer.file.name)
        raise
    return transfer


@transaction.atomic
def start_export(*, owner, format: str, chat=None, folder: Folder | None = None) -> Transfer:
    """Queue an export of one chat, a folder's chats, or (neither given) every chat of the owner.
    Raises InvalidInput (format) for an unknown format and (scope) when there is nothing to export."""
    if format not in EXPORT_FORMATS:
        raise InvalidInput.for_field("format", f"must be one of {', '.join(EXPORT_FORMATS)}")
    scope = {"chat": str(chat.pk)} if chat is not None else {"folder": folder.pk} if folder is not None else {}
    transfer = Transfer(owner=owner, kind=Transfer.Kind.EXPORT, format=format, scope=scope,
                        name=chat.title if chat is not None else folder.name if folder is not None else "All chats")
    if not exporting.chats_in_scope(transfer).exists():
        raise InvalidInput.for_field("scope", "has no chats to export")
    transfer.save()
    _send_on_commit(transfer)
    return transfer


def _send_on_commit(transfer: Transfer) -> None:
    events.broadcast_on_commit(events.user_group(transfer.owner_id), events.transfer_updated(transfer))
    transaction.on_commit(lambda: app.send_task(RUN_TRANSFER_TASK, args=[str(transfer.pk)], ignore_result=True))


def run_transfer(*, transfer_id: str) -> str:
    """Run a queued job (the run_transfer task); a finished one, or one gone, is left alone.
    Returns the status it ended in."""
    claimed = Transfer.objects.filter(
        pk=transfer_id, status__in=[Transfer.Status.QUEUED, Transfer.Status.RUNNING]
    ).update(status=Transfer.Status.RUNNING)
    transfer = Transfer.objects.select_related("owner").filter(pk=transfer_id).first()
    if not claimed or transfer is None:
        return transfer.status if transfer else "gone"
    events.broadcast_now(events.user_group(transfer.owner_id), events.transfer_updated(transfer))
    try:
        if transfer.kind == Transfer.Kind.IMPORT:
            importing.run_import(transfer)
        else:
            exporting.run_export(transfer)
    except importing.Overtaken:
        return Transfer.Status.RUNNING  # the other delivery finishes it
    except HubError as exc:
        _finish(transfer, status=Transfer.Status.FAILED, error=str(exc))
    except Exception:
        log.exception("transfer %s failed", transfer.pk)
        _finish(transfer, status=Transfer.Status.FAILED, error="Something went wrong on the hub; try again.")
    else:
        _finish(transfer, status=Transfer.Status.DONE)
    return transfer.status


def _finish(transfer: Transfer, *, status: str, error: str = "") -> None:
    if transfer.kind == Transfer.Kind.IMPORT and transfer.file:
        transfer.file.delete(save=False)  # the upload is imported (or refused): it takes no more room
    if transfer.kind == Transfer.Kind.IMPORT and transfer.report.get("skips"):
        transfer.report = {**transfer.report, "first_skip": importing.skip_text(transfer.report["skips"][0])}
    transfer.status, transfer.error, transfer.finished_at = status, error[:2000], timezone.now()
    Transfer.objects.filter(pk=transfer.pk).update(status=status, error=transfer.error, report=transfer.report,
                                                   finished_at=transfer.finished_at, file=transfer.file.name or "")
    events.broadcast_now(events.user_group(transfer.owner_id), events.transfer_updated(transfer))


@transaction.atomic
def delete_transfer(*, transfer: Transfer) -> None:
    """Forget a finished job and its file (the chats it imported stay)."""
    if transfer.status in (Transfer.Status.QUEUED, Transfer.Status.RUNNING):
        raise InvalidInput.for_field("transfer", "is still running")
    name, storage = transfer.file.name, transfer.file.storage
    transfer.delete()
    if name:
        transaction.on_commit(lambda: storage.delete(name))


def purge_expired_exports() -> int:
    """Delete the files of exports finished more than HUB_EXPORT_KEEP_DAYS ago (the hourly beat
    task). Each job stays, without its file and marked expired in its report, and its owner's tabs
    hear of it. Returns how many files were deleted."""
    cutoff = timezone.now() - timedelta(days=settings.HUB_EXPORT_KEEP_DAYS)
    expired = Transfer.objects.filter(kind=Transfer.Kind.EXPORT, finished_at__lt=cutoff).exclude(file="")
    purged = 0
    for transfer in expired.iterator():
        name, storage = transfer.file.name, transfer.file.storage
        transfer.file = ""
        transfer.report = {**transfer.report, "expired_at": timezone.now().isoformat()}
        # The row first: a job whose file is gone never offers it, even if the delete below fails.
        if Transfer.objects.filter(pk=transfer.pk, file=name).update(file="", report=transfer.report):
            storage.delete(name)
            purged += 1
            events.broadcast_now(events.user_group(transfer.owner_id), events.transfer_updated(transfer))
    return purged
