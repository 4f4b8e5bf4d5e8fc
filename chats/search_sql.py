"""The full-text index SQL, shared by migration 0004 and chats.search.ensure_sqlite_index.

PostgreSQL: GIN indexes over to_tsvector('simple', ...). SQLite: FTS5 tables kept in step by
triggers (external content for messages and shared documents; chats are keyed by UUID, so their
FTS table keeps the chat id beside its own rowid).
"""

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


SQLITE_TRIGGERS = {f"{t}_fts_{s}" for t in ("chats_message", "chats_shareddocument", "chats_chat")
                   for s in ("ai", "ad", "au")}
