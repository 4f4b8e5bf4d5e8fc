"""A file's text as an agent's turn reads it: the whole text of a short file; from a long one, the
passages that best answer the turn's question (chats.attachments.search.ranked_file_passages) and its
opening, in the file's order. The text comes from the passages the file was indexed in
(chats.services.attachments.read_file_text), so a turn never reads the file itself."""

from dataclasses import dataclass

from chats.attachments.files import FILES_LABEL
from chats.attachments.search import ranked_file_passages
from chats.models import Attachment, SharedDocument

# A file of up to this many passages (about 7,000 characters) goes whole.
WHOLE_PASSAGES = 6
# From a longer one: this many passages, the best for the question first, then its opening.
CHOSEN_PASSAGES = 5
# The most characters a passage's next one repeats (chats.attachments.reading.split_passages).
MAX_OVERLAP = 400
# A shorter repeat is kept: so few characters could end one passage and start the next by chance.
MIN_OVERLAP = 20


@dataclass(frozen=True)
class FileText:
    text: str
    whole: bool  # False: passages of it, each headed with the file's name and page


def file_text(attachment: Attachment, *, question: str) -> FileText:
    passages = SharedDocument.objects.filter(owner_id=attachment.owner_id, label=FILES_LABEL,
                                             key__startswith=f"{attachment.pk}#")
    keys = sorted(passages.values_list("key", flat=True), key=_number)
    if len(keys) <= WHOLE_PASSAGES:
        chosen, whole = keys, True
    else:
        best = ranked_file_passages(owner_id=attachment.owner_id, file_id=attachment.pk, question=question,
                                    limit=CHOSEN_PASSAGES)
        opening = [key for key in keys if key not in best]
        chosen, whole = sorted([*best, *opening][:CHOSEN_PASSAGES], key=_number), False
    contents = dict(passages.filter(key__in=chosen).values_list("key", "content"))
    texts = [contents[key] for key in chosen if key in contents]
    if whole:
        return FileText(text=_joined([_body(text) for text in texts]), whole=True)
    return FileText(text="\n…\n".join(texts), whole=False)


def _number(key: str) -> int:
    return int(key.rsplit("#", 1)[1])


def _body(passage: str) -> str:
    """A passage without its header line ("[lease.pdf, page 3]")."""
    return passage.split("\n", 1)[1] if passage.startswith("[") and "\n" in passage else passage


def _joined(bodies: list[str]) -> str:
    """Consecutive passages as the one text they were cut from: the start each repeats of the one
    before (the overlap that keeps a sentence whole in one of them) is left out."""
    text = ""
    for body in bodies:
        text += body[_repeated(text, body):] if text else body
        text += "\n" if not text.endswith("\n") else ""
    return text.strip()


def _repeated(before: str, body: str) -> int:
    """How many of body's first characters (at least MIN_OVERLAP) end `before`, allowing for the
    whitespace stripped between them; 0 when none do."""
    tail = before.rstrip()
    for size in range(min(MAX_OVERLAP, len(tail), len(body)), MIN_OVERLAP - 1, -1):
        if tail.endswith(body[:size].rstrip()):
            return size
    return 0
