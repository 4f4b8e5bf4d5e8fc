"""Full-text search indexes (the SQL is in chats/search_sql.py)."""

from django.db import migrations

from chats.search_sql import SQLITE, SQLITE_REVERSE

# As first built; 0006 moved message search to its own table (chats/search_sql.py has the current SQL).
POSTGRES = [
    "CREATE INDEX IF NOT EXISTS message_content_fts ON chats_message USING GIN (to_tsvector('simple', content))",
    "CREATE INDEX IF NOT EXISTS chat_text_fts ON chats_chat "
    "USING GIN (to_tsvector('simple', title || ' ' || description))",
    "CREATE INDEX IF NOT EXISTS shared_document_fts ON chats_shareddocument "
    "USING GIN (to_tsvector('simple', content))",
]
POSTGRES_REVERSE = [
    "DROP INDEX IF EXISTS message_content_fts",
    "DROP INDEX IF EXISTS chat_text_fts",
    "DROP INDEX IF EXISTS shared_document_fts",
]


def run(statements_by_vendor):
    def apply(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return apply


class Migration(migrations.Migration):
    dependencies = [("chats", "0003_trash")]
    operations = [
        migrations.RunPython(
            run({"postgresql": POSTGRES, "sqlite": SQLITE}),
            run({"postgresql": POSTGRES_REVERSE, "sqlite": SQLITE_REVERSE}),
        )
    ]
