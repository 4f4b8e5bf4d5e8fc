"""Celery tasks of conversations: thin — call the service."""

from celery import shared_task

from chats import services


@shared_task(name="chats.expire_temporary_chats", ignore_result=True)
def expire_temporary_chats() -> int:
    return services.expire_temporary_chats()


@shared_task(name="chats.purge_trash", ignore_result=True)
def purge_trash() -> int:
    return services.purge_expired_chats()
