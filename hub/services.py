"""Writes to the hub's own state: API tokens. Each runs in one transaction.

The token itself is returned once, by create_api_token, and never stored or logged.
"""

import hashlib
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from hub.errors import InvalidInput
from hub.models import ApiToken

TOKEN_PREFIX = "hub_"
MAX_ACTIVE_TOKENS = 50
# last_used_at is a hint for the user, not an audit log: writing it at most once a minute keeps
# a busy program from turning every read into a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def digest_of(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidInput.for_field("name", "must be 1 to 100 characters")
    return name


@transaction.atomic
def create_api_token(*, user, name: str) -> tuple[ApiToken, str]:
    """Make a token for user; returns the row and the token (shown to the user once, then gone).

    Raises InvalidInput for an empty or too-long name, or too many live tokens.
    """
    name = _clean_name(name)
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_ACTIVE_TOKENS:
        raise InvalidInput.for_field("name", f"at most {MAX_ACTIVE_TOKENS} live tokens; revoke one first")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:12], digest=digest_of(raw))
    return token, raw


@transaction.atomic
def rename_api_token(*, token: ApiToken, name: str) -> ApiToken:
    """Give a token another name (what it is for); InvalidInput for an empty or too-long one."""
    token.name = _clean_name(name)
    token.save(update_fields=["name"])
    return token


@transaction.atomic
def revoke_api_token(*, token: ApiToken) -> ApiToken:
    """Revoke a token; the next request with it answers 401. Revoking twice changes nothing."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db(fields=["revoked_at"])
    return token


def authenticate_token(raw: str) -> ApiToken | None:
    """The live token with that value (its user loaded), noting when it was used; else None."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=digest_of(raw), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
