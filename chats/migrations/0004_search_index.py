"""Full-text search indexes: PostgreSQL GIN over to_tsvector, SQLite FTS5 tables kept by triggers."""

from django.db import migrations

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


def sqlite_fts(table: str, columns: str, new_values: str, old_values: str) -> list[str]:
    """An external-content FTS5 table over `table` and the triggers that keep it in step."""
    fts = f"{table}_fts"
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5({columns}, content='{table}', content_rowid='id', "
        "tokenize='unicode61 remove_diacritics 2')",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_ai AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO {fts}(rowid, {columns}) VALUES ({new_values}); END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_ad AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {columns}) VALUES ('delete', {old_values}); END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_au AFTER UPDATE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {columns}) VALUES ('delete', {old_values}); "
        f"INSERT INTO {fts}(rowid, {columns}) VALUES ({new_values}); END",
    ]


SQLITE = [
    *sqlite_fts("chats_message", "content", "new.id, new.content", "old.id, old.content"),
    *sqlite_fts("chats_shareddocument", "content", "new.id, new.content", "old.id, old.content"),
]
# Chats are keyed by UUID, so their FTS table keeps its own rowid and the chat id beside it.
SQLITE += [
    "CREATE VIRTUAL TABLE IF NOT EXISTS chats_chat_fts USING fts5(chat_id UNINDEXED, body, "
    "tokenize='unicode61 remove_diacritics 2')",
    "INSERT INTO chats_chat_fts(chat_id, body) SELECT id, title || ' ' || description FROM chats_chat",
    "CREATE TRIGGER IF NOT EXISTS chats_chat_fts_ai AFTER INSERT ON chats_chat BEGIN "
    "INSERT INTO chats_chat_fts(chat_id, body) VALUES (new.id, new.title || ' ' || new.description); END",
    "CREATE TRIGGER IF NOT EXISTS chats_chat_fts_ad AFTER DELETE ON chats_chat BEGIN "
    "DELETE FROM chats_chat_fts WHERE chat_id = old.id; END",
    "CREATE TRIGGER IF NOT EXISTS chats_chat_fts_au AFTER UPDATE OF title, description ON chats_chat BEGIN "
    "UPDATE chats_chat_fts SET body = new.title || ' ' || new.description WHERE chat_id = old.id; END",
]
SQLITE_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {t}_fts_{s}" for t in ("chats_message", "chats_shareddocument", "chats_chat")
      for s in ("ai", "ad", "au")),
    "DROP TABLE IF EXISTS chats_message_fts",
    "DROP TABLE IF EXISTS chats_shareddocument_fts",
    "DROP TABLE IF EXISTS chats_chat_fts",
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
