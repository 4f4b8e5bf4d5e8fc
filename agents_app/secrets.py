"""Secrets at rest: per-user provider keys and remotes' headers, encrypted with keys derived from
SECRET_KEY (one per purpose).

A stored key is never shown again: pages show only its last four characters, and nothing here
logs or returns it except key_for, which the provider code calls when it builds a model.
"""

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import transaction

from agents_app.models import ProviderKey
from chats.temporary.scope import outside
from hub.errors import InvalidInput


def _fernet(purpose: bytes = b"hub-provider-keys:") -> Fernet:
    digest = hashlib.sha256(purpose + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


REMOTE_HEADERS = b"hub-remote-headers:"


def seal_headers(headers: dict[str, str]) -> str:
    """A remote's headers as stored: encrypted JSON ("" for none)."""
    return _fernet(REMOTE_HEADERS).encrypt(json.dumps(headers).encode()).decode() if headers else ""


def open_headers(sealed: str) -> dict[str, str] | None:
    """A remote's stored headers in clear; None when they cannot be read (SECRET_KEY changed)."""
    if not sealed:
        return {}
    try:
        return json.loads(_fernet(REMOTE_HEADERS).decrypt(sealed.encode()))
    except InvalidToken:
        return None


@transaction.atomic
def store_key(*, owner, provider: str, key: str) -> ProviderKey:
    """Save (or replace) the user's key for provider."""
    key = (key or "").strip()
    if provider not in ProviderKey.Provider.values:
        raise InvalidInput.for_field("provider", f"must be one of {', '.join(ProviderKey.Provider.values)}")
    if len(key) < 8:
        raise InvalidInput.for_field("key", "does not look like an API key")
    row, _ = ProviderKey.objects.update_or_create(
        owner=owner, provider=provider,
        defaults={"encrypted_key": _fernet().encrypt(key.encode()).decode(), "hint": key[-4:]},
    )
    return row


def delete_key(*, owner, provider: str) -> bool:
    deleted, _ = ProviderKey.objects.filter(owner=owner, provider=provider).delete()
    return bool(deleted)


def key_for(*, owner_id, provider: str) -> str | None:
    """The decrypted key, or None (no key, or SECRET_KEY changed since it was stored)."""
    with outside():  # the account's keys, even from a temporary chat (whose image holds none)
        row = ProviderKey.objects.filter(owner_id=owner_id, provider=provider).first()
    if row is None:
        return None
    try:
        return _fernet().decrypt(row.encrypted_key.encode()).decode()
    except InvalidToken:
        return None
