"""The hub's own state: per-user API tokens for programs (the REST API, hub/api/)."""

from django.conf import settings
from django.db import models


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
