"""Reads of the hub's own rows: a user's API tokens."""

from hub.errors import NotFound
from hub.models import ApiToken


def token_for_user(*, user, token_id) -> ApiToken:
    try:
        return ApiToken.objects.get(user=user, pk=int(token_id))
    except (ApiToken.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such token") from None


def tokens_of(*, user):
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")
