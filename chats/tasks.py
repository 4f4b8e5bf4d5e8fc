"""Celery tasks of conversations: thin — call the service."""

from celery import shared_task

from chats import services


@shared_task(name="chats.expire_temporary_chats", ignore_result=True)
def expire_temporary_chats() -> int:
    return services.expire_temporary_chats()


@shared_task(name="chats.purge_trash", ignore_result=True)
def purge_trash() -> int:
    return services.purge_expired_chats()


# acks_late: a worker that dies while reading leaves the file to be read again.
@shared_task(name="chats.read_file", ignore_result=True, acks_late=True)
def read_file(file_id: str) -> str:
    return services.read_file_text(file_id=file_id)
