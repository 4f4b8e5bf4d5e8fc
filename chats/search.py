"""Search over a user's hub: messages across all their chats, chat titles, the shared index.

One interface over both backends: PostgreSQL (tsvector with GIN indexes; messages in a table of
their own partitioned by owner) and SQLite (FTS5 tables kept in step by triggers; messages in an
index whose words carry their owner's tag) — the SQL is in chats/search_sql.py. Either way a
user's message search reads that user's index entries only. Queries are free text:
quotes, operators and unicode are taken as words (each a prefix), never as syntax, so no query
can raise. Snippets mark matches as [[word]]. Deleted chats never show.
"""

import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC

from django.db import connection, transaction
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from chats import search_sql
from chats.models import SharedDocument
from chats.temporary import chats as temporary_chats
from chats.temporary.images import ChatGone
from chats.temporary.scope import current, inside, outside
from hub.errors import InvalidInput

MAX_TERMS = 12
MAX_LIMIT = 100
# Words too common to say what a question is about (a file's best passages, the Librarian's topic).
COMMON_WORDS = frozenset("""
    a about an and any are as at be by can could did do does for from had has have how i if in is it its me
    my of on or our please say says should that the their them there these they this those to was we what
    when where which who why will with would you your
""".split())


@dataclass
class Hit:
    chat_id: str
    chat_title: str
    thread_id: int | None
    message_id: int | None
    snippet: str
    rank: float
    created_at: str | None = None  # a message's, as ISO 8601

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def terms_of(query: str) -> list[str]:
    """The words of a query, lower-cased, without syntax; at most MAX_TERMS."""
    if not isinstance(query, str):
        return []
    return re.findall(r"\w+", query.lower())[:MAX_TERMS]


def _fts_query(terms: list[str], vendor: str) -> str:
    """Every term must match, as a word prefix; terms are \\w+ only, so nothing is syntax."""
    if vendor == "postgresql":
        return " & ".join(f"{t}:*" for t in terms)
    return " ".join(f'"{t}"*' for t in terms)


def _owner_fts_query(terms: list[str], owner_id: int) -> str:
    """The same query over SQLite's owner index: each term carries the owner's tag, as the
    indexed words do, so it matches that owner's words only (chats/search_sql.py)."""
    return " ".join(f'"{search_sql.owner_words(owner_id, t)}"*' for t in terms)


def _chat_uuid(value) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))


MESSAGE_SQL = {
    # Rank and page first in a subquery; the headline is computed for the page only.
    "postgresql": """
        SELECT page.id, page.chat_id, page.thread_id, page.title, page.rank, m.created_at,
               ts_headline('simple', m.content, to_tsquery('simple', %(q)s),
                           'StartSel=[[, StopSel=]], MaxWords=28, MinWords=8, MaxFragments=1')
        FROM (
            SELECT s.message_id AS id, s.chat_id, s.thread_id, c.title,
                   ts_rank(s.vector, to_tsquery('simple', %(q)s)) AS rank
            FROM chats_message_search s JOIN chats_chat c ON c.id = s.chat_id
            WHERE s.owner_id = %(owner)s AND s.vector @@ to_tsquery('simple', %(q)s)
              AND c.owner_id = %(owner)s AND c.deleted_at IS NULL
              AND s.message_id <> ALL(%(exclude)s)
              AND (s.sender_agent_id IS NULL OR s.sender_agent_id <> %(agent)s)
            ORDER BY rank DESC, s.message_id DESC LIMIT %(limit)s OFFSET %(offset)s
        ) page JOIN chats_message m ON m.id = page.id
        ORDER BY page.rank DESC, page.id DESC
    """,
    # Ranks the owner's matches only (the owner index); the page's snippets come after
    # (_sqlite_snippets). The owner filter stays as a second guard.
    "sqlite": """
        SELECT m.id, m.chat_id, m.thread_id, c.title, -bm25(chats_message_owner_fts) AS rank, m.created_at
        FROM chats_message_owner_fts
        JOIN chats_message m ON m.id = chats_message_owner_fts.rowid
        JOIN chats_chat c ON c.id = m.chat_id
        WHERE chats_message_owner_fts MATCH %(owner_q)s
          AND c.owner_id = %(owner)s AND c.deleted_at IS NULL AND m.kind IN ('message', 'note')
          AND m.id NOT IN (SELECT value FROM json_each(%(exclude_json)s))
          AND (m.sender_agent_id IS NULL OR m.sender_agent_id <> %(agent)s)
        ORDER BY rank DESC, m.id DESC LIMIT %(limit)s OFFSET %(offset)s
    """,
}

# FTS5 cuts a snippet only from a row its MATCH found, and the owner index holds tagged words and
# no text. So the page's messages are matched again, with the plain words, in a small FTS5 table
# of the connection's own (temp: never written to the database file), which gives the snippet the
# global index gave. A snippet depends only on its own text and the query, not on other rows.
SNIPPET_TABLE = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.message_snippet USING fts5(content, "
                 "tokenize='unicode61 remove_diacritics 2')")
SNIPPET_FILL = ("INSERT INTO temp.message_snippet(rowid, content) "
                "SELECT id, content FROM chats_message WHERE id IN (SELECT value FROM json_each(%s))")
SNIPPET_SQL = ("SELECT rowid, snippet(message_snippet, 0, '[[', ']]', '…', 20) FROM temp.message_snippet "
               "WHERE message_snippet MATCH %s")


def _sqlite_snippets(cursor, ids: list[int], query: str) -> dict[int, str]:
    """{message id: snippet} for the page's messages."""
    cursor.execute(SNIPPET_TABLE)
    cursor.execute("DELETE FROM temp.message_snippet")  # emptied first: a failed search may have left rows
    cursor.execute(SNIPPET_FILL, [json.dumps(ids)])
    cursor.execute(SNIPPET_SQL, [query])
    return dict(cursor.fetchall())


def search_messages(*, owner, query: str, limit: int = 20, offset: int = 0, exclude_ids=(),
                    exclude_agent_id=None) -> list[Hit]:
    """Messages (and notes) across all the user's live chats in one indexed query, best first
    (on SQLite a second one cuts the page's snippets).

    exclude_ids and exclude_agent_id let an agent leave out the question it is answering and
    its own replies. The user's temporary chats are searched too, each in its image (they are
    few and small); their hits come first, as the chats the user is in the middle of.
    """
    terms = terms_of(query)
    if not terms:
        return []
    limit, offset = _bounded(limit, offset)
    temporary = temporary_chats.owned(owner.pk)
    if not temporary:
        with outside():
            return _search_messages_here(owner, terms, limit, offset, exclude_ids, exclude_agent_id)
    hits = []
    for chat_id in temporary:
        try:
            with inside(chat_id):
                hits += _search_messages_here(owner, terms, limit + offset, 0, exclude_ids, exclude_agent_id)
        except ChatGone:
            continue
    with outside():
        hits += _search_messages_here(owner, terms, limit + offset, 0, exclude_ids, exclude_agent_id)
    return hits[offset:offset + limit]


def _search_messages_here(owner, terms, limit, offset, exclude_ids, exclude_agent_id) -> list[Hit]:
    """search_messages on the database the default connection is now."""
    vendor = connection.vendor
    exclude = [int(i) for i in exclude_ids]
    params = {
        "q": _fts_query(terms, vendor), "owner": owner.pk, "limit": limit, "offset": offset,
        "exclude": exclude, "exclude_json": json.dumps(exclude), "agent": exclude_agent_id or -1,
    }
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(MESSAGE_SQL[vendor], params)
            rows = cursor.fetchall()
        else:
            cursor.execute(MESSAGE_SQL[vendor], {**params, "owner_q": _owner_fts_query(terms, owner.pk)})
            page = cursor.fetchall()
            snippets = _sqlite_snippets(cursor, [row[0] for row in page], params["q"]) if page else {}
            rows = [(*row, snippets.get(row[0], "")) for row in page]
    return [Hit(_chat_uuid(chat), title, thread, mid, tidy(text), float(rank), _iso(created))
            for mid, chat, thread, title, rank, created, text in rows]


def _iso(value) -> str | None:
    """A time from a row (a datetime, or SQLite's text) as ISO 8601 in UTC."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None:
        return None
    return (value if timezone.is_aware(value) else timezone.make_aware(value, UTC)).isoformat()


CHAT_SQL = {
    "postgresql": """
        SELECT c.id, c.title, ts_headline('simple', c.title || ' ' || c.description, to_tsquery('simple', %(q)s),
               'StartSel=[[, StopSel=]], MaxWords=20, MinWords=5, MaxFragments=1'),
               ts_rank(to_tsvector('simple', c.title || ' ' || c.description), to_tsquery('simple', %(q)s)) AS rank
        FROM chats_chat c
        WHERE to_tsvector('simple', c.title || ' ' || c.description) @@ to_tsquery('simple', %(q)s)
          AND c.owner_id = %(owner)s AND c.deleted_at IS NULL
        ORDER BY rank DESC, c.updated_at DESC LIMIT %(limit)s OFFSET %(offset)s
    """,
    "sqlite": """
        SELECT c.id, c.title, snippet(chats_chat_fts, 1, '[[', ']]', '…', 16), -bm25(chats_chat_fts) AS rank
        FROM chats_chat_fts JOIN chats_chat c ON c.id = chats_chat_fts.chat_id
        WHERE chats_chat_fts MATCH %(q)s AND c.owner_id = %(owner)s AND c.deleted_at IS NULL
        ORDER BY rank DESC, c.updated_at DESC LIMIT %(limit)s OFFSET %(offset)s
    """,
}


def search_chats(*, owner, query: str, limit: int = 20, offset: int = 0) -> list[Hit]:
    """The user's live chats whose title or description matches, best first."""
    terms = terms_of(query)
    if not terms:
        return []
    limit, offset = _bounded(limit, offset)
    with outside(), connection.cursor() as cursor:
        vendor = connection.vendor
        cursor.execute(CHAT_SQL[vendor], {"q": _fts_query(terms, vendor), "owner": owner.pk, "limit": limit,
                                          "offset": offset})
        rows = cursor.fetchall()
    return [Hit(_chat_uuid(chat), title, None, None, tidy(text), float(rank)) for chat, title, text, rank in rows]


def tidy(text: str) -> str:
    return " ".join((text or "").split())


def _bounded(limit, offset) -> tuple[int, int]:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput.for_field("limit", f"must be from 1 to {MAX_LIMIT}")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput.for_field("offset", "must be 0 or more")
    return limit, offset


@transaction.atomic
def index_shared(*, owner, label: str, key: str, content: str) -> SharedDocument:
    """Put content in the shared index under (label, key); re-indexing a key replaces it. Raises
    NotWrittenHere from a temporary chat."""
    if current() is not None:
        raise temporary_chats.NotWrittenHere(code="index_read_only", message=(
            "Not indexed: this is a temporary chat, whose text stays out of the database. "
            "It can be indexed once the user saves the chat."))
    label, key = (label or "").strip(), (key or "").strip()
    if not label or len(label) > 100:
        raise InvalidInput.for_field("label", "must be 1 to 100 characters")
    if not key or len(key) > 300:
        raise InvalidInput.for_field("key", "must be 1 to 300 characters")
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput.for_field("content", "may not be empty")
    document, _ = SharedDocument.objects.update_or_create(
        owner=owner, label=label, key=key, defaults={"content": content}
    )
    return document


def document_for_user(*, owner, document_id) -> SharedDocument:
    """One entry of the user's shared index; another user's or a malformed id is NotFound."""
    from hub.errors import NotFound

    try:
        return SharedDocument.objects.get(owner=owner, pk=int(document_id))
    except (SharedDocument.DoesNotExist, ValueError, TypeError, OverflowError):
        raise NotFound("no such document") from None


def documents_for(*, owner, label: str | None = None):
    documents = SharedDocument.objects.filter(owner=owner)
    if label:
        documents = documents.filter(label=label)
    return documents.order_by("label", "key", "id")


@transaction.atomic
def delete_shared(*, document: SharedDocument) -> None:
    """Remove one entry of the shared index (its index rows go with it)."""
    document.delete()


SHARED_SQL = {
    "postgresql": """
        SELECT d.key, ts_headline('simple', d.content, to_tsquery('simple', %(q)s),
               'StartSel=[[, StopSel=]], MaxWords=28, MinWords=8, MaxFragments=1'),
               ts_rank(to_tsvector('simple', d.content), to_tsquery('simple', %(q)s)) AS rank
        FROM chats_shareddocument d
        WHERE to_tsvector('simple', d.content) @@ to_tsquery('simple', %(q)s)
          AND d.owner_id = %(owner)s AND d.label = %(label)s
        ORDER BY rank DESC, d.id DESC LIMIT %(limit)s
    """,
    "sqlite": """
        SELECT d.key, snippet(chats_shareddocument_fts, 0, '[[', ']]', '…', 20), -bm25(chats_shareddocument_fts) AS rank
        FROM chats_shareddocument_fts JOIN chats_shareddocument d ON d.id = chats_shareddocument_fts.rowid
        WHERE chats_shareddocument_fts MATCH %(q)s AND d.owner_id = %(owner)s AND d.label = %(label)s
        ORDER BY rank DESC, d.id DESC LIMIT %(limit)s
    """,
}


def search_shared(*, owner, label: str, query: str, limit: int = 10) -> list[dict]:
    """The shared index under one label, best first: [{key, snippet, rank}]."""
    terms = terms_of(query)
    if not terms:
        return []
    limit, _ = _bounded(limit, 0)
    with outside(), connection.cursor() as cursor:
        vendor = connection.vendor
        cursor.execute(SHARED_SQL[vendor], {"q": _fts_query(terms, vendor), "owner": owner.pk, "label": label,
                                            "limit": limit})
        rows = cursor.fetchall()
    return [{"key": key, "snippet": tidy(text), "rank": float(rank)} for key, text, rank in rows]


def index_drift(*, fix: bool = False) -> list[str]:
    """Where the message and document search rows disagree with their rows; a line per table.

    With fix, the drifted tables are rebuilt from the rows. (PostgreSQL's GIN indexes over
    chats and documents cannot drift; its message search table, kept by triggers, can.)
    """
    if connection.vendor == "postgresql":
        return _postgres_message_drift(fix=fix)
    search_sql.use_sqlite_functions(connection)
    problems = []
    with connection.cursor() as cursor:
        for table in ("chats_message", "chats_shareddocument"):
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            rows = cursor.fetchone()[0]
            cursor.execute(f"SELECT COUNT(*) FROM {table}_fts_docsize")
            indexed = cursor.fetchone()[0]
            try:
                cursor.execute(f"INSERT INTO {table}_fts({table}_fts, rank) VALUES ('integrity-check', 1)")
                healthy = rows == indexed
            except Exception:
                healthy = False
            if not healthy:
                problems.append(f"{table}: {rows} rows, {indexed} indexed")
                if fix:
                    cursor.execute(f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')")
        problems += _owner_index_drift(cursor, fix=fix)
    return problems


# Messages and notes, their rows in the owner index, the ones without a row, and chats whose
# owner the index's triggers would read wrongly. A contentless index keeps no text to compare.
OWNER_DRIFT_SQL = f"""
    SELECT
      (SELECT COUNT(*) FROM chats_message WHERE kind IN {search_sql.MESSAGE_SEARCH_KINDS}),
      (SELECT COUNT(*) FROM {search_sql.OWNER_INDEX}_docsize),
      (SELECT COUNT(*) FROM chats_message m LEFT JOIN {search_sql.OWNER_INDEX}_docsize d ON d.id = m.id
       WHERE m.kind IN {search_sql.MESSAGE_SEARCH_KINDS} AND d.id IS NULL),
      (SELECT COUNT(*) FROM chats_chat c LEFT JOIN {search_sql.OWNER_TABLE} o ON o.chat_id = c.id
       WHERE o.owner_id IS NOT c.owner_id)
"""


def _owner_index_drift(cursor, *, fix: bool) -> list[str]:
    cursor.execute(OWNER_DRIFT_SQL)
    rows, indexed, missing, chats = cursor.fetchone()
    try:
        cursor.execute(f"INSERT INTO {search_sql.OWNER_INDEX}({search_sql.OWNER_INDEX}) VALUES ('integrity-check')")
        healthy = rows == indexed and not missing and not chats
    except Exception:
        healthy = False
    if healthy:
        return []
    if fix:
        for statement in search_sql.SQLITE_OWNER_INDEX_FILL:
            cursor.execute(statement)
    return [f"chats_message (per owner): {rows} rows, {indexed} indexed, {missing} missing, "
            f"{chats} chats without their owner"]


POSTGRES_DRIFT_SQL = f"""
    SELECT
      (SELECT COUNT(*) FROM chats_message m WHERE m.kind IN {search_sql.MESSAGE_SEARCH_KINDS}),
      (SELECT COUNT(*) FROM chats_message_search),
      (SELECT COUNT(*) FROM chats_message m JOIN chats_chat c ON c.id = m.chat_id
       LEFT JOIN chats_message_search s ON s.owner_id = c.owner_id AND s.message_id = m.id
       WHERE m.kind IN {search_sql.MESSAGE_SEARCH_KINDS}
         AND (s.message_id IS NULL
              OR (m.status <> 'streaming' AND s.vector <> to_tsvector('simple', m.content))
              OR s.thread_id IS DISTINCT FROM m.thread_id OR s.sender_agent_id IS DISTINCT FROM m.sender_agent_id))
"""


def _postgres_message_drift(*, fix: bool) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(POSTGRES_DRIFT_SQL)
        rows, indexed, wrong = cursor.fetchone()
        if rows == indexed and not wrong:
            return []
        if fix:
            with transaction.atomic():
                cursor.execute("TRUNCATE chats_message_search")
                cursor.execute(search_sql.POSTGRES_MESSAGE_SEARCH_FILL)
    return [f"chats_message: {rows} rows, {indexed} indexed, {wrong} missing or stale"]


def ensure_sqlite_index(using: str = "default") -> None:
    """Create the SQLite FTS tables and triggers if any are missing, and resync them then.

    Run after every migrate (post_migrate): SQLite rebuilds a table to alter it, which drops its
    triggers, so a later migration of chats_message or chats_chat would silently stop the index.
    """
    from django.db import connections

    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    search_sql.use_sqlite_functions(connection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        present = {row[0] for row in cursor.fetchall()}
        if present >= search_sql.SQLITE_TRIGGERS:
            return
        for statement in search_sql.SQLITE_REVERSE:
            cursor.execute(statement)
        for statement in search_sql.SQLITE:
            cursor.execute(statement)


# A word in more messages than this is "common": see message_text_filter.
COMMON_WORD_MATCHES = 5000


def message_text_filter(term: str) -> tuple[Q | None, int | None]:
    """The staff's message search, over every owner: (filter, count) for messages and notes whose
    content has every word of term (each as a prefix), through the same index (chats_message_search
    on PostgreSQL, FTS5 on SQLite). count is set when the words are common: a floor, not exact.

    The index answers a rare word at once, but a word in most of a million messages makes it
    gather every match before the newest page can be cut from them (seconds). A quick probe
    (at most COMMON_WORD_MATCHES rows, which are the answer when there are no more) tells the two
    apart; a common word is instead found by reading the newest messages first, which reaches a
    page of matches within a few dozen rows.
    """
    words = terms_of(term)
    if not words:
        return None, None
    query = _fts_query(words, connection.vendor)
    if connection.vendor != "postgresql":
        return Q(pk__in=RawSQL("SELECT rowid FROM chats_message_fts WHERE chats_message_fts MATCH %s", [query])), None
    with connection.cursor() as cursor:
        cursor.execute("SELECT message_id FROM chats_message_search WHERE vector @@ to_tsquery('simple', %s) "
                       "LIMIT %s", [query, COMMON_WORD_MATCHES + 1])
        found = [row[0] for row in cursor.fetchall()]
    if len(found) <= COMMON_WORD_MATCHES:
        return Q(pk__in=found), None  # the ids themselves: the page is then read through the primary key
    matches = len(found)
    reads = RawSQL("to_tsvector('simple', chats_message.content) @@ to_tsquery('simple', %s)", [query],
                   output_field=BooleanField())
    return Q(reads, kind__in=["message", "note"]), matches
