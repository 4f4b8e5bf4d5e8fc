"""What an attached file is, the text inside it, and that text cut into passages.

Files in chats are uploads from anyone, so nothing here trusts them. `sniff` names a file's type
from its first bytes; the name a user gave it only tells text kinds apart and says which office
format a zip claims to be (the zip's members are checked again when it is read). `read_text`
turns a file already on local disk into plain text by that type, under hard limits on pages,
characters, rows and unpacked size, so a huge or hostile file costs bounded time and memory;
what cannot be read raises `Unreadable` with a short reason a user can be shown. Nothing is ever
evaluated: no scripts, no macros, no formulas (spreadsheets give the values last saved).
`split_passages` cuts the text into overlapping passages of about a fixed size, each with the
page it starts on, for search and for quoting to a model.

Pure functions over local files: no database, no network, no Django.

The PDF and office parsers are imported by the functions that read those formats, not at the top:
every web and worker process imports this module (for `sniff`, `split_passages`, `IMAGE_TYPES`),
but only the child of `reader_process` reads a file, and the three libraries were about a quarter
of a second of each process's start.
"""

from __future__ import annotations

import bisect
import codecs
import html.parser
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pypdf
    from docx.table import Table

MAX_PAGES = 2000
MAX_CHARS = 2_000_000
MAX_UNZIPPED_BYTES = 200 * 1024 * 1024
MAX_SHEET_ROWS = 100_000

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_PDF = "application/pdf"
_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
_SVG = "image/svg+xml"
_HTML = "text/html"
_BINARY = "application/octet-stream"

# Real office files compress their XML about 10:1; far beyond that a large member is all padding.
_BOMB_RATIO = 200
_BOMB_RATIO_ABOVE_BYTES = 1024 * 1024
# A sheet may claim rows as far apart and as wide as it likes, and the gaps come back as empty
# rows and cells: every cell visited counts, empty or not, so such a sheet still ends soon.
_MAX_WORKBOOK_CELLS = 10_000_000
# HTML is mostly markup; past this much of it the rest is not read even if little text came out
# (the standard library's parser takes about 8 s over 10 MB of nothing but tags).
_HTML_MARKUP_PER_TEXT_CHAR = 5
_PROGRESS_EVERY_PAGES = 10

_UTF8_BOM = b"\xef\xbb\xbf"
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<script")
_SVG_STARTS = (b"<svg", b"<!doctype svg")
_PREAMBLES = ((b"<?xml", b"?>"), (b"<!--", b"-->"))
_SPACES = re.compile(rb"\s*")
_SOURCE_EXTENSIONS = frozenset(
    ".py .js .ts .tsx .jsx .java .c .h .cpp .go .rs .rb .php .sh .sql .yaml .yml .toml .css .kt"
    " .swift .cs .scala .r .lua .pl .hs .ex .exs".split()
)
_TEXT_TYPES_BY_EXTENSION = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
} | dict.fromkeys(_SOURCE_EXTENSIONS, "text/x-source")


class Unreadable(Exception):
    """A file whose text cannot be read; the message is a short reason a user can be shown."""


@dataclass
class Reading:
    text: str
    pages: int  # PDF pages read, sheets for a workbook, 1 for anything else
    stopped: str = ""  # why reading ended before the end of the file; "" when all of it was read


# ---------------------------------------------------------------------------------------- sniff


def sniff(head: bytes, name: str) -> str:
    """The content type of a file from its first bytes (8 KB or more); `name` only picks among
    text kinds and office formats, since a user can name a file anything."""
    if head.startswith(b"%PDF-"):
        return _PDF
    if image := _image_type(head):
        return image
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_type(name)
    if markup := _markup_type(head):
        return markup
    if _looks_like_text(head):
        return _TEXT_TYPES_BY_EXTENSION.get(os.path.splitext(name.lower())[1], "text/plain")
    return _BINARY


def _image_type(head: bytes) -> str:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return ""


def _zip_type(name: str) -> str:
    lowered = name.lower()
    if lowered.endswith(".docx"):
        return _DOCX
    if lowered.endswith(".xlsx"):
        return _XLSX
    return "application/zip"


def _markup_type(head: bytes) -> str:
    """SVG or HTML when the file opens as one, past whitespace, a BOM, an XML prolog and comments."""
    lowered = head.removeprefix(_UTF8_BOM).lower()
    start = _after_preamble(lowered)
    if start.startswith(_SVG_STARTS):
        return _SVG
    if lowered.lstrip().startswith(b"<?xml") and _svg_before_html(start):
        return _SVG
    if start.startswith(_HTML_STARTS):
        return _HTML
    return ""


def _after_preamble(lowered: bytes) -> bytes:
    """What follows leading whitespace, `<?xml …?>` and `<!-- … -->` (by offsets, not copies, so
    a head full of tiny comments still takes linear time)."""
    position = _SPACES.match(lowered).end()
    while True:
        for opening, closing in _PREAMBLES:
            close = lowered.find(closing, position + len(opening)) if lowered.startswith(opening, position) else -1
            if close >= 0:
                position = _SPACES.match(lowered, close + len(closing)).end()
                break
        else:
            return lowered[position:]


def _svg_before_html(lowered: bytes) -> bool:
    svg, page = lowered.find(b"<svg"), lowered.find(b"<html")
    return svg >= 0 and (page < 0 or svg < page)


def _looks_like_text(head: bytes) -> bool:
    """UTF-8 without NUL bytes; the head may end inside a character, which is not an error."""
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


# ------------------------------------------------------------------------------------ read_text


def read_text(path: str | os.PathLike, content_type: str, *, progress: Callable[[int], None] | None = None) -> Reading:
    """The text of the file at `path`, read as `content_type` (what `sniff` said).

    `progress(pages_read)` is called every few pages of a PDF and at its end. Raises Unreadable
    for images, binary files and anything damaged, encrypted, textless or too big to unpack.
    """
    kind = content_type.split(";")[0].strip().lower()
    if kind == _PDF:
        return _read_pdf(path, progress)
    if reader := _READERS.get(kind):
        return reader(path)
    if kind in IMAGE_TYPES:
        raise Unreadable("an image: no text to read")
    if kind == _SVG:
        raise Unreadable("an SVG image: not read")
    raise Unreadable("binary file")


class _Collected:
    """Text gathered up to MAX_CHARS; past that it is cut and `stopped` says so."""

    def __init__(self):
        self.parts: list[str] = []
        self.size = 0
        self.stopped = ""

    def add(self, part: str) -> bool:
        """Keep `part`, or what fits of it; False once the limit is reached."""
        if self.stopped:
            return False
        part = part.replace("\x00", "")  # PostgreSQL text cannot hold NUL
        room = MAX_CHARS - self.size
        if len(part) > room:
            part = part[:room]
            self.stopped = f"stopped at {MAX_CHARS:,} characters"
        self.parts.append(part)
        self.size += len(part)
        return not self.stopped

    def text(self) -> str:
        return re.sub(r"\n{3,}", "\n\n", "".join(self.parts)).strip()


def _read_pdf(path, progress) -> Reading:
    with open(path, "rb") as file:  # pypdf reads the pages from the file as it needs them
        return _pdf_text(_open_pdf(file), progress)


def _pdf_text(reader: pypdf.PdfReader, progress) -> Reading:
    total = _pdf_page_count(reader)
    collected = _Collected()
    read = broken = 0
    found_text = False
    for number in range(1, min(total, MAX_PAGES) + 1):
        read = number
        text = _pdf_page_text(reader, number)
        broken += text is None
        text = (text or "").strip()
        found_text = found_text or bool(text)
        full = bool(text) and not collected.add(f"[page {number}]\n{text}\n\n")
        if progress and number % _PROGRESS_EVERY_PAGES == 0:
            progress(number)
        if full:
            break
    if progress and read % _PROGRESS_EVERY_PAGES:
        progress(read)
    if not found_text:
        raise Unreadable("damaged PDF" if broken or not total else "no text in this PDF (scanned pages?)")
    stopped = collected.stopped
    if not stopped and total > read:
        stopped = f"stopped at {read:,} pages of {total:,}"
    return Reading(text=collected.text(), pages=read, stopped=stopped)


def _open_pdf(file) -> pypdf.PdfReader:
    """A reader over the PDF, decrypted when it was encrypted with no password (as many are, only
    to forbid printing or copying)."""
    import pypdf

    try:
        reader = pypdf.PdfReader(file)
    except Exception as error:  # a damaged file fails in any of many ways inside pypdf
        raise Unreadable("damaged PDF") from error
    if reader.is_encrypted:
        try:
            decrypted = reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
        except Exception as error:  # an encryption scheme pypdf cannot handle
            raise Unreadable("encrypted PDF") from error
        if not decrypted:
            raise Unreadable("encrypted PDF")
    return reader


def _pdf_page_count(reader: pypdf.PdfReader) -> int:
    try:
        return len(reader.pages)
    except Exception as error:
        raise Unreadable("damaged PDF") from error


def _pdf_page_text(reader: pypdf.PdfReader, number: int) -> str | None:
    """The page's text, or None when the page is broken: the other pages may still read."""
    try:
        return reader.pages[number - 1].extract_text()
    except Exception:
        return None


def _refuse_zip_bomb(path, kind: str) -> None:
    """Refuse, before any member is unpacked, a zip that would unpack too far. The sizes are the
    ones the zip declares, which is enough: zipfile never inflates a member past its declared size."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise Unreadable(f"not a valid {kind} file") from error
    total = sum(member.file_size for member in members)
    if total > MAX_UNZIPPED_BYTES or any(map(_inflates_too_far, members)):
        raise Unreadable(f"this {kind} file looks like a decompression bomb")


def _inflates_too_far(member: zipfile.ZipInfo) -> bool:
    if member.file_size <= _BOMB_RATIO_ABOVE_BYTES:
        return False
    return member.file_size > _BOMB_RATIO * max(member.compress_size, 1)


def _read_docx(path) -> Reading:
    import docx
    from docx.table import Table

    _refuse_zip_bomb(path, "DOCX")
    collected = _Collected()
    # A file object, not the path: the file on disk need not be named .docx.
    with open(path, "rb") as file:
        try:
            document = docx.Document(file)
            for block in document.iter_inner_content():
                lines = _table_lines(block) if isinstance(block, Table) else [block.text]
                if not all(collected.add(line + "\n") for line in lines):
                    break
        except Exception as error:  # python-docx and lxml fail in many ways on a broken package
            raise Unreadable("not a valid DOCX file") from error
    return Reading(text=collected.text(), pages=1, stopped=collected.stopped)


def _table_lines(table: Table) -> list[str]:
    """A table's rows as tab-separated lines, then a blank line. A merged cell comes back once
    for each grid cell it spans; it is kept once (python-docx has no public id for a cell)."""
    seen = {}  # id -> the element itself: holding it keeps lxml from reusing its id for another
    lines = []
    for row in table.rows:
        cells = []
        for cell in row.cells:
            if id(cell._tc) not in seen:
                seen[id(cell._tc)] = cell._tc
                cells.append(_one_line(cell.text))
        lines.append("\t".join(cells).rstrip("\t"))
    return [*lines, ""]


_LINE_BREAKERS = str.maketrans({"\t": " ", "\n": " ", "\r": " "})


def _one_line(value: str) -> str:
    """A cell's text that keeps its row on one line and its columns apart."""
    return value.translate(_LINE_BREAKERS).strip()


def _read_xlsx(path) -> Reading:
    import openpyxl

    _refuse_zip_bomb(path, "XLSX")
    # A file object, not the path: openpyxl refuses paths not named .xlsx.
    with open(path, "rb") as file:
        try:
            workbook = openpyxl.load_workbook(file, read_only=True, data_only=True)
            try:
                return _workbook_text(workbook)
            finally:
                workbook.close()
        except Exception as error:  # openpyxl fails in many ways on a broken package
            raise Unreadable("not a valid XLSX file") from error


def _workbook_text(workbook) -> Reading:
    collected = _Collected()
    notes = []
    cells = sheets = 0
    for sheet in workbook.worksheets:
        if not collected.add(f"[sheet {sheet.title}]\n"):
            break
        sheets += 1
        sheet.reset_dimensions()  # the size a file claims would pad every row out to it
        cells, note = _add_sheet_rows(sheet, collected, cells)
        if note:
            notes.append(note)
        if collected.stopped or cells > _MAX_WORKBOOK_CELLS:
            break
        collected.add("\n")
    return Reading(text=collected.text(), pages=sheets, stopped=collected.stopped or "; ".join(notes))


def _add_sheet_rows(sheet, collected: _Collected, cells: int) -> tuple[int, str]:
    """Add the sheet's non-empty rows as tab-separated lines. Returns the count of cells visited
    in the workbook so far and, when the sheet was not read to its end, why."""
    for number, row in enumerate(sheet.iter_rows(values_only=True), 1):
        if number > MAX_SHEET_ROWS:
            return cells, f"stopped at {MAX_SHEET_ROWS:,} rows of sheet {sheet.title}"
        cells += len(row)
        if cells > _MAX_WORKBOOK_CELLS:
            return cells, f"stopped at {_MAX_WORKBOOK_CELLS:,} cells"
        line = "\t".join(map(_cell_text, row)).rstrip("\t")
        if line and not collected.add(line + "\n"):
            break
    return cells, ""


def _cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 3, not the 3.0 a spreadsheet stores
    return _one_line(str(value))


def _read_plain(path) -> Reading:
    """Text decoded as UTF-8, bad bytes replaced and a BOM dropped. Reading a count of characters
    decodes the file a chunk at a time, so a huge file is never read whole; line ends become
    "\\n", which is where passages break."""
    with open(path, encoding="utf-8-sig", errors="replace") as file:
        text = file.read(MAX_CHARS + 1)
    stopped = ""
    if len(text) > MAX_CHARS:
        text, stopped = text[:MAX_CHARS], f"stopped at {MAX_CHARS:,} characters"
    return Reading(text=text.replace("\x00", ""), pages=1, stopped=stopped)


class _HtmlText(html.parser.HTMLParser):
    """The text of an HTML page: what a reader would see, in lines, and nothing that would run."""

    SKIPPED = frozenset({"script", "style", "template", "noscript"})
    BLOCKS = frozenset(
        "address article aside blockquote dd div dl dt figcaption figure footer form h1 h2 h3 h4 h5 h6"
        " header hr li main nav ol p pre section table title tr ul".split()
    )
    CELLS = frozenset({"td", "th"})

    def __init__(self, collected: _Collected):
        super().__init__(convert_charrefs=True)
        self.collected = collected
        self.skipping = 0
        self.preformatted = 0
        self.line_ends = 0  # line ends since the last words

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIPPED:
            self.skipping += 1
        elif tag == "pre":
            self.preformatted += 1
        if tag in self.BLOCKS or tag == "br":
            self._end_line()
        elif tag in self.CELLS:
            self.collected.add("\t")

    def handle_endtag(self, tag):
        if tag in self.SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
        elif tag == "pre":
            self.preformatted = max(self.preformatted - 1, 0)
        if tag in self.BLOCKS:
            self._end_line()

    def handle_data(self, data):
        if self.skipping:
            return
        self.collected.add(data if self.preformatted else re.sub(r"\s+", " ", data))
        if data.strip():
            self.line_ends = 0

    def _end_line(self):
        # A blank line at most between words: a page of empty tags must not fill the text limit.
        if self.line_ends < 2:
            self.collected.add("\n")
            self.line_ends += 1


def _read_html(path) -> Reading:
    collected = _Collected()
    parser = _HtmlText(collected)
    markup_limit = _HTML_MARKUP_PER_TEXT_CHAR * MAX_CHARS
    markup_read = 0
    with open(path, encoding="utf-8-sig", errors="replace") as file:
        while not collected.stopped and markup_read < markup_limit and (chunk := file.read(64 * 1024)):
            markup_read += len(chunk)
            parser.feed(chunk)
        more = bool(file.read(1))
    parser.close()
    stopped = collected.stopped
    if not stopped and more:
        stopped = f"stopped after {markup_read:,} characters of HTML"
    return Reading(text=_tidy_lines(collected.text()), pages=1, stopped=stopped)


def _tidy_lines(text: str) -> str:
    """Lines without stray spaces around them or their cells, and at most one blank line in a row."""
    lines = (re.sub(r" *\t *", "\t", line).strip(" \t") for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


_READERS = {
    _DOCX: _read_docx,
    _XLSX: _read_xlsx,
    _HTML: _read_html,
    "text/csv": _read_plain,  # already tabular text
    "text/markdown": _read_plain,
    "text/plain": _read_plain,
    "text/x-source": _read_plain,
    "application/json": _read_plain,
}


# ------------------------------------------------------------------------------- split_passages

_PAGE_MARKER = re.compile(r"^\[page (\d+)\]$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s|。")


def split_passages(text: str, *, size: int = 1200, overlap: int = 150) -> list[tuple[int, str]]:
    """`text` cut into passages of at most `size` characters, each with the 1-based page it starts
    on (from `[page N]` marker lines; 1 without them).

    A passage ends at a blank line if one is in its second half, else at a line end, a sentence
    end or a space. The next one starts up to `overlap` characters earlier, at the first line or
    sentence start there, so a sentence cut at the boundary is whole in the next passage. Each
    step looks at a window of about `size` characters only, so time is linear in the text.
    """
    if size < 4 or not 0 <= overlap < size // 2:
        raise ValueError("split_passages needs size >= 4 and 0 <= overlap < size / 2")
    pages = _page_starts(text)
    passages = []
    start = 0
    while start < len(text):
        end = len(text) if len(text) - start <= size else _passage_end(text, start, size)
        chunk = text[start:end]
        if passage := chunk.strip():
            first_word = start + len(chunk) - len(chunk.lstrip())
            passages.append((_page_at(pages, first_word), passage))
        if end == len(text):
            break
        start = _next_start(text, end, overlap)
    return passages


def _passage_end(text: str, start: int, size: int) -> int:
    """Where the passage from `start` ends: the best break in the second half of its `size`."""
    low, high = start + size // 2, start + size
    for mark in ("\n\n", "\n"):
        found = text.rfind(mark, low, high)
        if found >= 0:
            return found + len(mark)
    sentences = list(_SENTENCE_END.finditer(text, low, high))
    if sentences:
        return sentences[-1].end()
    found = text.rfind(" ", low, high)
    return found + 1 if found >= 0 else high


def _next_start(text: str, end: int, overlap: int) -> int:
    """Where the passage after one ending at `end` starts: the earliest line or sentence start in
    the last `overlap` characters, else the first word start there."""
    low = end - overlap
    starts = []
    line = text.find("\n", low, end)
    if line >= 0:
        starts.append(line + 1)
    if sentence := _SENTENCE_END.search(text, low, end):
        starts.append(sentence.end())
    if starts:
        return min(starts)
    space = text.find(" ", low, end)
    return space + 1 if space >= 0 else low


def _page_starts(text: str) -> tuple[list[int], list[int]]:
    """The offsets of the page marker lines, and their page numbers."""
    offsets, numbers = [], []
    for marker in _PAGE_MARKER.finditer(text):
        offsets.append(marker.start())
        numbers.append(int(marker.group(1)))
    return offsets, numbers


def _page_at(pages: tuple[list[int], list[int]], offset: int) -> int:
    offsets, numbers = pages
    index = bisect.bisect_right(offsets, offset) - 1
    return numbers[index] if index >= 0 else 1
