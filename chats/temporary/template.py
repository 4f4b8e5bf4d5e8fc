"""The image a new temporary chat starts from: every table of the hub, empty."""

import sqlite3
import threading

from django.apps import apps
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper

from chats import search_sql
from chats.temporary.connection import SETTINGS
from chats.temporary.images import first_id, images
from chats.temporary.scope import standing_in

_template = None
_template_lock = threading.Lock()


def _build_template() -> bytes:
    """Every table of the hub, empty, with the search index's tables and triggers."""
    # Under the default alias, which the schema editor's transaction uses.
    connection = SQLiteWrapper(dict(SETTINGS), alias="default")
    try:
        with standing_in(connection), connection.schema_editor() as editor:
            for model in apps.get_models():
                if model._meta.managed and not model._meta.proxy:
                    editor.create_model(model)
        with connection.cursor() as cursor:
            for statement in search_sql.SQLITE + search_sql.SQLITE_OWNER_INDEX:
                cursor.execute(statement)
        return connection.connection.serialize()
    finally:
        connection.connection.close()


def new_image() -> bytes:
    """An empty image whose rows get ids of a block of their own (images.first_id)."""
    global _template
    with _template_lock:
        if _template is None:
            _template = _build_template()
    db = sqlite3.connect(":memory:")
    try:
        db.deserialize(_template)
        start = first_id(images().next_id_block()) - 1
        tables = [row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'"
        )]
        db.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", [(t, start) for t in tables])
        db.commit()
        return db.serialize()
    finally:
        db.close()
