"""Celery tasks of conversations: thin — call the service."""

import random

from celery import shared_task

from chats import services
from chats.attachments.reader_process import ReadersBusy


@shared_task(name="chats.expire_temporary_chats", ignore_result=True)
def expire_temporary_chats() -> int:
    return services.expire_temporary_chats()


@shared_task(name="chats.purge_trash", ignore_result=True)
def purge_trash() -> int:
    return services.purge_expired_chats()


@shared_task(name="chats.archive_idle_chats", ignore_result=True)
def archive_idle_chats() -> int:
    return services.archive_idle_chats()


# acks_late: a worker that dies while reading leaves the file to be read again. A worker already
# reading its share of files (HUB_FILE_READS_AT_ONCE) puts the file back in the queue for a
# second or two, for itself or another worker, rather than hold a thread waiting.
@shared_task(bind=True, name="chats.read_file", ignore_result=True, acks_late=True, max_retries=None)
def read_file(self, file_id: str) -> str:
    try:
        return services.read_file_text(file_id=file_id)
    except ReadersBusy:
        raise self.retry(countdown=1 + random.random()) from None


# acks_late: a worker that dies during an import leaves the job to go on where it stopped
# (each chat is counted in the transaction that imports it).
@shared_task(name="chats.run_transfer", ignore_result=True, acks_late=True)
def run_transfer(transfer_id: str) -> str:
    from chats.transfers import jobs

    return jobs.run_transfer(transfer_id=transfer_id)


@shared_task(name="chats.purge_expired_exports", ignore_result=True)
def purge_expired_exports() -> int:
    from chats.transfers import jobs

    return jobs.purge_expired_exports()
