"""The full-text index SQL, shared by the migrations, chats.search and the repair checks.

PostgreSQL: messages are searched in `chats_message_search`, one row per message or note with its
owner and its tsvector, kept in step by triggers on chats_message and hash-partitioned by owner,
so a search reads one slice of the index instead of every user's matches (a GIN index over all
messages made a common word cost hundreds of milliseconds at a million messages: see
bench/search.py). Chats and shared documents keep GIN indexes over to_tsvector('simple', ...).
SQLite: FTS5 tables kept in step by triggers (external content for messages and shared
documents; chats are keyed by UUID, so their FTS table keeps the chat id beside its own rowid).
A user's message search reads chats_message_owner_fts, whose words carry their owner's tag (see
"SQLite: message search per owner" below); chats_message_fts serves the staff's search across owners.
"""

import re
import sqlite3

from django.db.backends.signals import connection_created

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


# --- SQLite: message search per owner ------------------------------------------------------
# chats_message_fts is one index over every user's messages, so a user's search gathered every
# user's matches of its words before keeping its own (426 ms p50 at 1,000,000 messages of 100
# users: bench/search.py). chats_message_owner_fts indexes the same words, each prefixed by its
# owner's tag ("u42x" + "tomatoes" for user 42), so the query "u42xtomat"* reads the postings of
# user 42 alone. FTS5's tokenizers are C and cannot tag, so the triggers call OWNER_WORDS_FUNCTION,
# a Python function that every SQLite connection of the hub registers (connection_created below).
# The index is contentless (it stores no text): chats.search ranks with it and cuts snippets from
# the page's real text. Only messages and notes are indexed, as only they are searched.
#
# The owner comes from chats_search_chat_owner (chat id -> owner, kept by a trigger on chats_chat)
# and not from chats_chat: Django alters a SQLite table by rebuilding it under another name and
# renaming it, and SQLite refuses that rename while a trigger or view elsewhere names the table
# that is, for that moment, gone. Chats never change owner, and a row outlives its chat so that
# messages deleted after their chat still find their tag.

OWNER_WORDS_FUNCTION = "hub_owner_words"
OWNER_INDEX = "chats_message_owner_fts"
OWNER_TABLE = "chats_search_chat_owner"
# Where a word starts for FTS5's unicode61 tokenizer: a letter or digit ("_" and punctuation
# separate words) not preceded by another, nor by a combining mark, which it keeps inside a word.
_WORD_START = re.compile(r"(?<![^\W_])(?<![\u0300-\u036f])(?=[^\W_])")


def owner_tag(owner_id: int) -> str:
    """A prefix no other owner's tag begins with: the digits end at the "x"."""
    return f"u{int(owner_id)}x"


def owner_words(owner_id, text):
    """text with its owner's tag before every word; separators are kept, so it tokenizes into
    the same words at the same positions. None when either is None (no words to index)."""
    if owner_id is None or text is None:
        return None
    return _WORD_START.sub(owner_tag(owner_id), text)


def add_sqlite_functions(dbapi_connection) -> None:
    """Register the functions the owner index's triggers call (safe to repeat)."""
    dbapi_connection.create_function(OWNER_WORDS_FUNCTION, 2, owner_words, deterministic=True)


def use_sqlite_functions(connection) -> None:
    """Make sure a Django SQLite connection has them, for code that may run on a connection
    opened before this module was imported (migrations, the repair)."""
    connection.ensure_connection()
    try:
        connection.connection.execute(f"SELECT {OWNER_WORDS_FUNCTION}(NULL, NULL)")
    except sqlite3.OperationalError:  # not there: SQLite refuses to replace one while a query runs
        add_sqlite_functions(connection.connection)


def _on_connection_created(sender, connection, **kwargs):
    if connection.vendor == "sqlite":
        add_sqlite_functions(connection.connection)


connection_created.connect(_on_connection_created, dispatch_uid="chats.search_sql.sqlite_functions")


def _owner_words_of(row: str) -> str:
    return (f"{OWNER_WORDS_FUNCTION}((SELECT owner_id FROM {OWNER_TABLE} WHERE chat_id = {row}.chat_id), "
            f"{row}.content)")


# Fills the owner index from the messages (after creating it, and to repair drift).
SQLITE_OWNER_INDEX_FILL = [
    f"INSERT OR REPLACE INTO {OWNER_TABLE} (chat_id, owner_id) SELECT id, owner_id FROM chats_chat",
    f"INSERT INTO {OWNER_INDEX}({OWNER_INDEX}) VALUES ('delete-all')",
    f"INSERT INTO {OWNER_INDEX}(rowid, body) "
    f"SELECT m.id, {OWNER_WORDS_FUNCTION}(o.owner_id, m.content) "
    f"FROM chats_message m JOIN {OWNER_TABLE} o ON o.chat_id = m.chat_id WHERE m.kind IN {MESSAGE_SEARCH_KINDS}",
]
SQLITE_OWNER_INDEX = [
    f"CREATE TABLE IF NOT EXISTS {OWNER_TABLE} (chat_id char(32) NOT NULL PRIMARY KEY, owner_id integer NOT NULL) "
    "WITHOUT ROWID",
    f"CREATE TRIGGER IF NOT EXISTS {OWNER_TABLE}_ai AFTER INSERT ON chats_chat BEGIN "
    f"INSERT OR REPLACE INTO {OWNER_TABLE} (chat_id, owner_id) VALUES (new.id, new.owner_id); END",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {OWNER_INDEX} USING fts5(body, content='', "
    "tokenize='unicode61 remove_diacritics 2')",
    *SQLITE_OWNER_INDEX_FILL,
    # A contentless index forgets a row only when told its exact words, so the old text is tagged
    # again on delete and update.
    f"CREATE TRIGGER IF NOT EXISTS {OWNER_INDEX}_ai AFTER INSERT ON chats_message "
    f"WHEN new.kind IN {MESSAGE_SEARCH_KINDS} BEGIN "
    f"INSERT INTO {OWNER_INDEX}(rowid, body) VALUES (new.id, {_owner_words_of('new')}); END",
    f"CREATE TRIGGER IF NOT EXISTS {OWNER_INDEX}_ad AFTER DELETE ON chats_message "
    f"WHEN old.kind IN {MESSAGE_SEARCH_KINDS} BEGIN "
    f"INSERT INTO {OWNER_INDEX}({OWNER_INDEX}, rowid, body) VALUES ('delete', old.id, {_owner_words_of('old')}); END",
    f"CREATE TRIGGER IF NOT EXISTS {OWNER_INDEX}_au AFTER UPDATE OF content, kind, chat_id ON chats_message "
    "WHEN old.content IS NOT new.content OR old.kind IS NOT new.kind OR old.chat_id IS NOT new.chat_id BEGIN "
    f"INSERT INTO {OWNER_INDEX}({OWNER_INDEX}, rowid, body) SELECT 'delete', old.id, {_owner_words_of('old')} "
    f"WHERE old.kind IN {MESSAGE_SEARCH_KINDS}; "
    f"INSERT INTO {OWNER_INDEX}(rowid, body) SELECT new.id, {_owner_words_of('new')} "
    f"WHERE new.kind IN {MESSAGE_SEARCH_KINDS}; END",
]
SQLITE_OWNER_INDEX_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {OWNER_INDEX}_{s}" for s in ("ai", "ad", "au")),
    f"DROP TRIGGER IF EXISTS {OWNER_TABLE}_ai",
    f"DROP TABLE IF EXISTS {OWNER_INDEX}",
    f"DROP TABLE IF EXISTS {OWNER_TABLE}",
]
SQLITE += SQLITE_OWNER_INDEX

SQLITE_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {t}_fts_{s}" for t in ("chats_message", "chats_shareddocument", "chats_chat")
      for s in ("ai", "ad", "au")),
    "DROP TABLE IF EXISTS chats_message_fts",
    "DROP TABLE IF EXISTS chats_shareddocument_fts",
    "DROP TABLE IF EXISTS chats_chat_fts",
    *SQLITE_OWNER_INDEX_REVERSE,
]


SQLITE_TRIGGERS = {f"{t}_fts_{s}" for t in ("chats_message", "chats_shareddocument", "chats_chat")
                   for s in ("ai", "ad", "au")}
SQLITE_TRIGGERS |= {f"{OWNER_INDEX}_{s}" for s in ("ai", "ad", "au")} | {f"{OWNER_TABLE}_ai"}
