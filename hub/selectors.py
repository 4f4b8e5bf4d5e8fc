"""Reads of the hub's own rows: a user's API tokens and invitations, and whether sign-up is open."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from hub.errors import NotFound
from hub.models import ApiToken, Invitation, token_digest

INVITATION_TOKEN_PREFIX = "inv_"


def token_for_user(*, user, token_id) -> ApiToken:
    try:
        return ApiToken.objects.get(user=user, pk=int(token_id))
    except (ApiToken.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such token") from None


def tokens_of(*, user):
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")


def signup_is_open() -> bool:
    """Anyone may sign up when the operator allows it (HUB_ALLOW_SIGNUP), or for the hub's first
    account; otherwise only with an invitation."""
    return settings.HUB_ALLOW_SIGNUP or not get_user_model().objects.exists()


def can_invite(user) -> bool:
    """Staff may always make invitation links; other users only when HUB_ALLOW_INVITES is set."""
    return bool(user.is_authenticated and user.is_active and (user.is_staff or settings.HUB_ALLOW_INVITES))


def invitations_of(*, user):
    return Invitation.objects.filter(created_by=user).select_related("used_by").order_by("-created_at")


def invitation_for_user(*, user, invitation_id) -> Invitation:
    try:
        return Invitation.objects.get(created_by=user, pk=int(invitation_id))
    except (Invitation.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such invitation") from None


def invitation_by_token(raw: str, *, lock: bool = False) -> Invitation | None:
    """The invitation of that link's token (its creator loaded), whatever its state; else None.
    `lock` holds its row until the transaction ends, so two sign-ups cannot both use it."""
    if not raw or not raw.startswith(INVITATION_TOKEN_PREFIX) or len(raw) > 200:
        return None
    rows = Invitation.objects.select_related("created_by")
    if lock:
        rows = rows.select_for_update(of=("self",))
    return rows.filter(digest=token_digest(raw)).first()


def invitation_problem(invitation: Invitation | None) -> str | None:
    """Why that invitation cannot make an account now, in words for its holder; None if it can.

    An invitation also stops working when its maker may no longer invite (deactivated, no longer
    staff, or HUB_ALLOW_INVITES turned off), so taking that right away takes their links with it.
    """
    if invitation is None:
        return "This invitation link is not valid. Check that you copied all of it."
    status = invitation.status_at(timezone.now())
    if status == "used":
        return "This invitation link was already used. Ask for a new one."
    if status == "revoked":
        return "This invitation link was withdrawn. Ask for a new one."
    if status == "expired":
        return "This invitation link has expired. Ask for a new one."
    if not can_invite(invitation.created_by):
        return "This invitation link is no longer valid. Ask for a new one."
    return None
