"""The hub's own state: per-user API tokens for programs (the REST API, hub/api/) and invitations."""

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone


def token_digest(raw: str) -> str:
    """What is stored of a token (an API token or an invitation's): its SHA-256, in hex."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A token a program sends as `Authorization: Bearer <token>`.

    Only a SHA-256 digest of the token is stored: the token is shown once, when it is made. A
    token is 32 random bytes, so a fast digest is enough (nothing to guess); the prefix lets a
    user tell their tokens apart. Revoking keeps the row (for the admin's record) and takes
    effect on the next request, since every request looks the token up.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the token, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"], name="api_token_user_created")]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Invitation(models.Model):
    """A link that lets one person create an account while sign-up is closed: /signup/?invite=<token>.

    As with ApiToken only a SHA-256 digest of the token is stored; the link is shown once. Used,
    revoked and expired invitations keep their row, so staff can see who invited whom.
    """

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                   related_name="invitations_made")
    note = models.CharField(max_length=100, blank=True, help_text="Who the invitation is for.")
    prefix = models.CharField(max_length=16, help_text="The first characters of the token, to recognise it.")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="invitations_used")
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["created_by", "-created_at"], name="invitation_creator_created")]

    def __str__(self):
        return f"{self.note or 'Invitation'} ({self.prefix}…)"

    def status_at(self, now) -> str:
        """One of "used", "revoked", "expired" or "open"."""
        if self.used_at is not None:
            return "used"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return "open"

    @property
    def status(self) -> str:
        return self.status_at(timezone.now())
