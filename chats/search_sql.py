"""The full-text index SQL, shared by the migrations, chats.search and the repair checks.

PostgreSQL: messages are searched in `chats_message_search`, one row per message or note with its
owner and its tsvector, kept in step by triggers on chats_message and hash-partitioned by owner,
so a search reads one slice of the index instead of every user's matches (a GIN index over all
messages made a common word cost hundreds of milliseconds at a million messages: see
bench/search.py). Chats and shared documents keep GIN indexes over to_tsvector('simple', ...).
SQLite: FTS5 tables kept in step by triggers (external content for messages and shared
documents; chats are keyed by UUID, so their FTS table keeps the chat id beside its own rowid).
"""

MESSAGE_SEARCH_PARTITIONS = 16
MESSAGE_SEARCH_KINDS = "('message', 'note')"

POSTGRES_MESSAGE_SEARCH = [
    "CREATE TABLE IF NOT EXISTS chats_message_search ("
    " owner_id integer NOT NULL, message_id bigint NOT NULL, chat_id uuid NOT NULL, thread_id bigint,"
    " sender_agent_id bigint, vector tsvector NOT NULL, PRIMARY KEY (owner_id, message_id)"
    ") PARTITION BY HASH (owner_id)",
    *(
        f"CREATE TABLE IF NOT EXISTS chats_message_search_{n} PARTITION OF chats_message_search "
        f"FOR VALUES WITH (MODULUS {MESSAGE_SEARCH_PARTITIONS}, REMAINDER {n})"
        for n in range(MESSAGE_SEARCH_PARTITIONS)
    ),
    # Deletes find their row by message id alone.
    "CREATE INDEX IF NOT EXISTS message_search_message ON chats_message_search (message_id)",
    # A message's row is written again whenever its content or status changes, so searches see
    # what the chat shows. A streaming reply is the exception: its checkpoints rewrite its text
    # four times a second, and indexing each one cost more than the rest of the checkpoint. It is
    # indexed as it starts and again as it settles (or is interrupted). Chats never change owner,
    # so the owner is read once.
    f"""CREATE OR REPLACE FUNCTION chats_message_search_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND OLD.status = 'streaming' AND NEW.status = 'streaming' THEN
            RETURN NULL;
        END IF;
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM chats_message_search WHERE message_id = OLD.id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.kind IN {MESSAGE_SEARCH_KINDS} THEN
            INSERT INTO chats_message_search (owner_id, message_id, chat_id, thread_id, sender_agent_id, vector)
            SELECT c.owner_id, NEW.id, NEW.chat_id, NEW.thread_id, NEW.sender_agent_id,
                   to_tsvector('simple', NEW.content)
            FROM chats_chat c WHERE c.id = NEW.chat_id;
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE OR REPLACE FUNCTION chats_message_search_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE chats_message_search;
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS chats_message_search_write ON chats_message",
    "CREATE TRIGGER chats_message_search_write "
    "AFTER INSERT OR DELETE OR UPDATE OF content, kind, sender_agent_id, status ON chats_message "
    "FOR EACH ROW EXECUTE FUNCTION chats_message_search_sync()",
    "DROP TRIGGER IF EXISTS chats_message_search_truncate ON chats_message",
    "CREATE TRIGGER chats_message_search_truncate AFTER TRUNCATE ON chats_message "
    "FOR EACH STATEMENT EXECUTE FUNCTION chats_message_search_truncate()",
]
# Fills the table from the messages (after creating it, and to repair drift after TRUNCATE).
POSTGRES_MESSAGE_SEARCH_FILL = (
    "INSERT INTO chats_message_search (owner_id, message_id, chat_id, thread_id, sender_agent_id, vector) "
    "SELECT c.owner_id, m.id, m.chat_id, m.thread_id, m.sender_agent_id, to_tsvector('simple', m.content) "
    f"FROM chats_message m JOIN chats_chat c ON c.id = m.chat_id WHERE m.kind IN {MESSAGE_SEARCH_KINDS}"
)
POSTGRES_MESSAGE_SEARCH_REVERSE = [
    "DROP TRIGGER IF EXISTS chats_message_search_write ON chats_message",
    "DROP TRIGGER IF EXISTS chats_message_search_truncate ON chats_message",
    "DROP FUNCTION IF EXISTS chats_message_search_sync()",
    "DROP FUNCTION IF EXISTS chats_message_search_truncate()",
    "DROP TABLE IF EXISTS chats_message_search",
]
POSTGRES_MESSAGE_SEARCH_TRIGGERS = {"chats_message_search_write", "chats_message_search_truncate"}

# The GIN indexes searches need, each as "CREATE INDEX IF NOT EXISTS <name> ON ...".
POSTGRES = [
    "CREATE INDEX IF NOT EXISTS message_search_vector ON chats_message_search USING GIN (vector)",
    "CREATE INDEX IF NOT EXISTS chat_text_fts ON chats_chat "
    "USING GIN (to_tsvector('simple', title || ' ' || description))",
    "CREATE INDEX IF NOT EXISTS shared_document_fts ON chats_shareddocument "
    "USING GIN (to_tsvector('simple', content))",
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
