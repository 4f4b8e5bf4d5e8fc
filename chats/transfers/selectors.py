"""Reads of import and export jobs, by their owner only."""

from django.core.exceptions import ValidationError as DjangoValidationError

from chats.models import Folder, Transfer
from hub.errors import NotFound

RECENT = 20


def transfer_for_user(*, user, transfer_id) -> Transfer:
    """The user's job with that id; another user's, or a malformed id, is NotFound."""
    try:
        return Transfer.objects.get(pk=transfer_id, owner=user)
    except (Transfer.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound("no such import or export") from None


def recent_transfers(*, user, limit: int = RECENT, before=None):
    """The user's jobs, newest first, a page at a time (before: a created_at)."""
    jobs = Transfer.objects.filter(owner=user)
    if before is not None:
        jobs = jobs.filter(created_at__lt=before)
    return list(jobs.order_by("-created_at", "-id")[:limit])


def folder_for_user(*, user, folder_id) -> Folder:
    try:
        return Folder.objects.get(pk=folder_id, owner=user)
    except (Folder.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound("no such folder") from None
