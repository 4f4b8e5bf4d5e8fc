"""Secrets are encrypted in the database: a remote's headers and a user's provider keys.

Read the rows as a database dump or a backup would show them: the secret is not there.
"""

import pytest
from django.db import connection

from agents_app import remotes, secrets

pytestmark = pytest.mark.django_db

HEADER_SECRET = "Bearer remote-secret-31337"
KEY_SECRET = "sk-alice-secret-key-31337"


def raw_rows(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - a fixed table name
        return repr(cursor.fetchall())


def test_a_remotes_headers_are_encrypted_at_rest_and_still_reach_its_connection(user):
    remote = remotes.create_remote(owner=user, name="Docs", url="http://127.0.0.1:9/mcp",
                                   headers={"Authorization": HEADER_SECRET})

    assert HEADER_SECRET not in raw_rows("agents_app_remote")
    assert "remote-secret-31337" not in raw_rows("agents_app_remote")
    assert remotes.headers_of(remote) == {"Authorization": HEADER_SECRET}
    assert remotes.header_names(remote) == ["Authorization"]


def test_a_provider_key_is_encrypted_at_rest(user):
    secrets.store_key(owner=user, provider="openai", key=KEY_SECRET)

    assert "secret-key-31337" not in raw_rows("agents_app_providerkey")
    assert secrets.key_for(owner_id=user.pk, provider="openai") == KEY_SECRET


def test_headers_sealed_under_another_secret_key_are_dropped_not_shown(user, settings):
    remote = remotes.create_remote(owner=user, name="Docs", url="http://127.0.0.1:9/mcp",
                                   headers={"Authorization": HEADER_SECRET})
    settings.SECRET_KEY = "another-secret-key-" + "y" * 40

    assert remotes.headers_of(remote) == {}
