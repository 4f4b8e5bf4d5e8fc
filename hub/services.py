"""Writes to the hub's own state: API tokens, invitations and sign-up. Each runs in one transaction.

A token (an API token or an invitation's) is returned once, by create_api_token or
create_invitation, and never stored or logged: only its digest is kept.
"""

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from hub import selectors
from hub.errors import HubError, InvalidInput, NotFound
from hub.models import ApiToken, Invitation, token_digest
from hub.own_database import own_database

TOKEN_PREFIX = "hub_"
MAX_ACTIVE_TOKENS = 50
# last_used_at is a hint for the user, not an audit log: writing it at most once a minute keeps
# a busy program from turning every read into a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


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
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:12], digest=token_digest(raw))
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
    with own_database():  # a request about a temporary chat may already stand on its image
        token = (
            ApiToken.objects.select_related("user")
            .filter(digest=token_digest(raw), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if token is None:
            return None
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
    return token


# --- Invitations and sign-up ------------------------------------------------------------------
MAX_OPEN_INVITATIONS = 50


class SignupClosed(HubError):
    code = "signup_closed"
    status = 403


class InvitationNotUsable(HubError):
    code = "invitation_not_usable"
    status = 403


@transaction.atomic
def create_invitation(*, user, note: str = "") -> tuple[Invitation, str]:
    """Make an invitation for user to hand out; returns the row and its token (shown once).

    The link is /signup/?invite=<token>, usable once, for HUB_INVITATION_DAYS. Raises NotFound
    when user may not invite (see selectors.can_invite), InvalidInput for a note over 100
    characters or too many open invitations.
    """
    if not selectors.can_invite(user):
        raise NotFound("no such page")
    note = (note or "").strip()
    if len(note) > 100:
        raise InvalidInput.for_field("note", "at most 100 characters")
    now = timezone.now()
    open_ones = Invitation.objects.filter(created_by=user, used_at__isnull=True, revoked_at__isnull=True,
                                          expires_at__gt=now)
    if open_ones.count() >= MAX_OPEN_INVITATIONS:
        raise InvalidInput.for_field("note", f"at most {MAX_OPEN_INVITATIONS} open invitations; revoke one first")
    raw = selectors.INVITATION_TOKEN_PREFIX + secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        created_by=user, note=note, prefix=raw[:12], digest=token_digest(raw),
        expires_at=now + timedelta(days=settings.HUB_INVITATION_DAYS),
    )
    return invitation, raw


@transaction.atomic
def revoke_invitation(*, invitation: Invitation) -> Invitation:
    """Withdraw an unused invitation; its link stops working at once. A used one stays as it is."""
    Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
    invitation.refresh_from_db(fields=["revoked_at"])
    return invitation


@transaction.atomic
def sign_up(*, username: str, password: str, invitation_token: str = ""):
    """Create an ordinary account with that username and password; returns the user.

    Allowed while sign-up is open (selectors.signup_is_open) or with a usable invitation, which
    the new account then uses up in the same transaction. Its row is locked first, so one
    invitation sent twice at once makes one account. The caller has validated the username and
    password (the sign-up form). Raises SignupClosed, InvitationNotUsable (its message says why)
    or InvalidInput when the username was taken meanwhile.
    """
    invitation = None
    if invitation_token:
        invitation = selectors.invitation_by_token(invitation_token, lock=True)
        problem = selectors.invitation_problem(invitation)
        if problem and not selectors.signup_is_open():
            raise InvitationNotUsable(problem)
        if problem:
            invitation = None  # sign-up is open anyway: the stale link does not matter
    elif not selectors.signup_is_open():
        raise SignupClosed("Sign-up on this hub is by invitation.")
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(username=username, password=password)
    except IntegrityError:
        raise InvalidInput.for_field("username", "A user with that username already exists.") from None
    if invitation is not None:
        Invitation.objects.filter(pk=invitation.pk).update(used_by=user, used_at=timezone.now())
    return user
