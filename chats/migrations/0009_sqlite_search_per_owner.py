"""On SQLite a user's message search reads only that user's index entries: chats_message_owner_fts
indexes every message and note with each word tagged by its owner, built here from the messages
already stored (see chats/search_sql.py). PostgreSQL already searches a table partitioned by
owner; nothing changes there.
"""

from django.db import migrations

from chats import search_sql


def build(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    search_sql.use_sqlite_functions(schema_editor.connection)
    for statement in search_sql.SQLITE_OWNER_INDEX:  # each one is safe to run again
        schema_editor.execute(statement)


def unbuild(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in search_sql.SQLITE_OWNER_INDEX_REVERSE:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("chats", "0008_search_skips_streaming_checkpoints")]
    operations = [migrations.RunPython(build, unbuild)]
