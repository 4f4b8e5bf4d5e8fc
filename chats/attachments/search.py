"""Searching the text of files (chats.services.attachments.read_file_text indexes it in passages
in the shared document search): the user's search across all their files, and the passages of one
file that best answer a question."""

import re
import uuid

from django.db import connection

from chats.attachments.files import FILES_LABEL, file_payload, uuid_or_none
from chats.models import Attachment, SharedDocument
from chats.search import COMMON_WORDS, search_shared, terms_of, tidy
from chats.temporary.scope import outside

PASSAGE_SQL = {
    "postgresql": """
        SELECT d.key, ts_rank(to_tsvector('simple', d.content), to_tsquery('simple', %(q)s)) AS rank
        FROM chats_shareddocument d
        WHERE to_tsvector('simple', d.content) @@ to_tsquery('simple', %(q)s)
          AND d.owner_id = %(owner)s AND d.label = %(label)s AND d.key LIKE %(prefix)s
        ORDER BY rank DESC, d.id LIMIT %(limit)s
    """,
    "sqlite": """
        SELECT d.key, -bm25(chats_shareddocument_fts) AS rank
        FROM chats_shareddocument_fts JOIN chats_shareddocument d ON d.id = chats_shareddocument_fts.rowid
        WHERE chats_shareddocument_fts MATCH %(q)s AND d.owner_id = %(owner)s AND d.label = %(label)s
          AND d.key LIKE %(prefix)s
        ORDER BY rank DESC, d.id LIMIT %(limit)s
    """,
}


def ranked_file_passages(*, owner_id, file_id, question: str, limit: int) -> list[str]:
    """Keys of one file's passages (chats.services.attachments.read_file_text) that share the most
    with a question, best first. Unlike a search, any of the question's words may match: a
    question is not a list of words that must all be there. Its common words are left out."""
    terms = [t for t in terms_of(question) if t not in COMMON_WORDS]
    if not terms:
        return []
    vendor = connection.vendor
    if vendor == "postgresql":
        query = " | ".join(f"{t}:*" for t in terms)
    else:
        query = " OR ".join(f'"{t}"*' for t in terms)
    with outside(), connection.cursor() as cursor:
        cursor.execute(PASSAGE_SQL[vendor], {"q": query, "owner": owner_id, "label": FILES_LABEL,
                                             "prefix": f"{uuid.UUID(str(file_id))}#%", "limit": limit})
        return [key for key, _rank in cursor.fetchall()]


def search_files(*, owner, query: str, limit: int = 8) -> list[dict]:
    """Passages of the user's files (chats.services.attachments.read_file_text), best first, each
    with its file's name and address, the page of the match and the chat it is in; files of a
    deleted chat are left out."""
    hits = search_shared(owner=owner, label=FILES_LABEL, query=query, limit=min(limit, 20) * 2)
    # A document the user indexed under this label by hand has a key that names no file.
    ids = {file_id for hit in hits if (file_id := uuid_or_none(hit["key"].split("#", 1)[0]))}
    found = {str(a.pk): a for a in Attachment.objects.filter(owner=owner, pk__in=ids, chat__deleted_at__isnull=True)
             .select_related("chat")}
    passages = dict(SharedDocument.objects.filter(owner=owner, label=FILES_LABEL, key__in=[h["key"] for h in hits])
                    .values_list("key", "content"))
    terms, results = terms_of(query), []
    for hit in hits:
        attachment = found.get(hit["key"].split("#", 1)[0])
        if attachment is None:
            continue
        passage = passages.get(hit["key"], "")
        results.append({"file_id": str(attachment.pk), "name": attachment.name, "url": file_payload(attachment)["url"],
                        "chat_id": str(attachment.chat_id), "chat_title": attachment.chat.title,
                        "page": _page_of_match(passage, terms),
                        "snippet": _file_snippet(passage, terms) or hit["snippet"]})
    return results[:limit]


def _file_snippet(passage: str, terms: list[str], width: int = 240) -> str:
    """About width characters of a passage's text around its first match, page markers left out
    and the matched words marked [[like this]] (the search's own snippet may show the header)."""
    body = re.sub(r"\s*\[page \d+\]\s*", " ", passage[passage.find("\n") + 1:]).strip()
    lowered = body.lower()
    found = [i for term in terms if (i := lowered.find(term.lower())) >= 0]
    start = max(0, min(found) - width // 3) if found else 0
    window = body[start:start + width]
    if not terms:
        return tidy(window)
    marked = re.sub(r"(?i)\b(" + "|".join(re.escape(t) for t in terms) + r")\w*", lambda m: f"[[{m.group(0)}]]", window)
    return ("…" if start else "") + tidy(marked) + ("…" if start + width < len(body) else "")


def _page_of_match(passage: str, terms: list[str]) -> int | None:
    """The page a passage's first match is on: the last "[page N]" marker before it, else the page
    its header says it starts on; None for a file without pages."""
    body = passage.find("\n") + 1  # after the header, which names the file (a term may match it)
    lowered = passage.lower()
    found = [i for term in terms if (i := lowered.find(term.lower(), body)) >= body]
    before = passage[: min(found)] if found else passage
    markers = re.findall(r"\[page (\d+)\]", before)
    if markers:
        return int(markers[-1])
    header = re.match(r"\[.*, page (\d+)\]", passage)
    return int(header.group(1)) if header else None
