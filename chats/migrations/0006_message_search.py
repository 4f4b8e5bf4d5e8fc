"""Message search on PostgreSQL moves to chats_message_search, partitioned by owner (see chats/search_sql.py).

SQLite keeps its FTS5 tables; nothing changes there.
"""

from django.db import migrations

from chats import search_sql


def build(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in search_sql.POSTGRES_MESSAGE_SEARCH:
        schema_editor.execute(statement)
    schema_editor.execute(search_sql.POSTGRES_MESSAGE_SEARCH_FILL)
    schema_editor.execute(search_sql.POSTGRES[0])
    schema_editor.execute("DROP INDEX IF EXISTS message_content_fts")


def unbuild(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS message_content_fts ON chats_message USING GIN (to_tsvector('simple', content))"
    )
    for statement in search_sql.POSTGRES_MESSAGE_SEARCH_REVERSE:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("chats", "0005_keep_times")]
    operations = [migrations.RunPython(build, unbuild)]
