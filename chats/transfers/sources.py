"""Reading an uploaded export as a stream: which kind of file it is, its conversations one at a
time, and how many there are, without ever holding the whole file in memory.

An export is a .json file, or a .zip as ChatGPT and Claude ship theirs (holding
conversations.json) or as Hub exports many chats (one Hub JSON file per chat). JSON is parsed with
ijson, which reads the bytes in chunks; a zip member is read as a stream too.
"""

import contextlib
import zipfile
from collections.abc import Iterator

import ijson

from chats.services.copies import EXPORT_FORMAT as HUB_FORMAT
from hub import input as hub_input
from hub.errors import InvalidInput

FORMATS = ("hub", "chatgpt", "claude")
FORMAT_NAMES = {"hub": "a Hub export", "chatgpt": "a ChatGPT export", "claude": "a Claude export"}
ZIP_MAGIC = b"PK\x03\x04"
SNIFF_ITEMS = 5  # entries looked at to tell ChatGPT's export from Claude's
CONVERSATIONS = "conversations.json"


def not_an_export(problem: str) -> InvalidInput:
    return InvalidInput.for_field("file", problem)


def check_looks_like_export(head: bytes) -> None:
    """Refuse at upload a file that is neither JSON nor a zip (an image, a PDF, a text)."""
    if head.startswith(ZIP_MAGIC):
        return
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] not in (b"{", b"["):
        raise not_an_export("is not an export: choose the .json or .zip file ChatGPT, Claude or Hub made")


@contextlib.contextmanager
def json_streams(stored) -> Iterator[list]:
    """The JSON documents of an opened upload: [the file] for a .json, [conversations.json] for a
    ChatGPT or Claude zip, or every .json member of a Hub zip. Each item is a callable that opens
    a fresh binary stream (a document is read twice: once to count and check, once to import)."""
    stored.seek(0)
    if stored.read(4) != ZIP_MAGIC:
        stored.seek(0)
        yield [_reopen_plain(stored)]
        return
    stored.seek(0)
    try:
        archive = zipfile.ZipFile(stored)
    except zipfile.BadZipFile:
        raise not_an_export("is a damaged zip file") from None
    with archive:
        names = [i.filename for i in archive.infolist() if not i.is_dir()]
        conversations = sorted((n for n in names if n.rsplit("/", 1)[-1] == CONVERSATIONS), key=len)
        chosen = conversations[:1] or sorted(n for n in names if n.lower().endswith(".json"))
        if not chosen:
            raise not_an_export(f"is a zip without {CONVERSATIONS} or any .json file")
        yield [_zip_member(archive, name) for name in chosen]


def _reopen_plain(stored):
    def opener():
        stored.seek(0)
        return contextlib.nullcontext(stored)
    opener.label = "the file"
    return opener


def _zip_member(archive: zipfile.ZipFile, name: str):
    def opener():
        return archive.open(name)
    opener.label = name
    return opener


def sniff_format(opener) -> str | None:
    """hub, chatgpt or claude from the start of a document (its first conversation's keys), or
    None when it is none of them. Raises InvalidInput (file) when it is not JSON."""
    with opener() as stream:
        try:
            events = ijson.parse(stream, use_float=True)
            _, event, _ = next(events)
            if event == "start_map":
                return "hub" if _names_hub_format(events) else None
            if event != "start_array":
                return None
            return _list_format(events)
        except (ijson.JSONError, StopIteration, UnicodeDecodeError) as exc:
            raise not_an_export(f"is not valid JSON ({_short(exc)})") from None


def _list_format(events, looked_at: int = SNIFF_ITEMS) -> str | None:
    """chatgpt or claude by the keys of the first entries (one broken entry does not decide), None
    when they name neither, "empty" for an empty list."""
    keys, items = set(), 0
    for prefix, event, value in events:
        if prefix == "item" and event == "map_key":
            keys.add(value)
        elif prefix == "item" and event in ("end_map", "end_array", "string", "number", "boolean", "null"):
            if "mapping" in keys:
                return "chatgpt"
            if "chat_messages" in keys:
                return "claude"
            keys, items = set(), items + 1
            if items >= looked_at:
                return None
        elif prefix == "" and event == "end_array":
            return "empty" if items == 0 else None
    return None


def _names_hub_format(events) -> bool:
    """Whether a document that is one object says it is a Hub export (its "format" comes first)."""
    for prefix, event, value in events:
        if prefix == "format":
            return event == "string" and value == HUB_FORMAT
    return False


def count_conversations(opener) -> int:
    """How many conversations a list document holds, reading it to the end: a syntax error
    anywhere is found here, before anything is stored."""
    count = 0
    with opener() as stream:
        try:
            for prefix, event, _ in ijson.parse(stream, use_float=True):
                if prefix == "item" and event in ("start_map", "start_array", "string", "number", "boolean", "null"):
                    count += 1
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            raise not_an_export(f"is not valid JSON ({_short(exc)}); nothing was imported") from None
    return count


def conversations(opener) -> Iterator:
    """The items of a list document, one at a time (numbers as float, as json would)."""
    with opener() as stream:
        yield from ijson.items(stream, "item", use_float=True)


def whole_document(opener):
    """A small document (one Hub chat) parsed whole, strictly (hub.input)."""
    with opener() as stream:
        raw = stream.read()
    try:
        return hub_input.loads(raw.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise not_an_export(f"{opener.label} is not valid JSON ({_short(exc)})") from None


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
