"""Reading attached files: what they are sniffed as, the text a user gets back, and its passages.

Pure tests: files are made here, on local disk, with the same libraries a user's office would use
(or by hand, for a PDF with text). No database.
"""

import io
import random
import re
import time
import zipfile

import docx
import openpyxl
import pypdf
import pytest
from PIL import Image

from chats.attachments import reading
from chats.attachments.reading import IMAGE_TYPES, Reading, Unreadable, read_text, sniff, split_passages

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def pdf_with_pages(texts: list[str]) -> bytes:
    """A minimal valid PDF, one page per text, each text set in Helvetica: pypdf can read text
    but not lay it out, so the file is written object by object with a correct xref table."""
    page_count = len(texts)
    kids = " ".join(f"{4 + 2 * index} 0 R" for index in range(page_count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {page_count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for index, text in enumerate(texts):
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
            f" /Contents {5 + 2 * index} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def encrypted_pdf(user_password: str) -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_page(pypdf.PdfReader(io.BytesIO(pdf_with_pages(["behind a lock"]))).pages[0])
    writer.encrypt(user_password=user_password, owner_password="the owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def sniffed(path) -> str:
    with open(path, "rb") as file:
        return sniff(file.read(8192), path.name)


def read(path, **kwargs) -> Reading:
    return read_text(path, sniffed(path), **kwargs)


def unreadable_reason(path, content_type=None) -> str:
    with pytest.raises(Unreadable) as refused:
        read_text(path, content_type or sniffed(path))
    return str(refused.value)


# ------------------------------------------------------------------------------------------ PDF


def test_a_pdf_reads_page_by_page(tmp_path):
    path = write(tmp_path / "report.pdf", pdf_with_pages(["Quarterly numbers", "Costs went down", "The end"]))

    reading_ = read(path)

    assert sniffed(path) == "application/pdf"
    assert reading_.pages == 3
    assert reading_.stopped == ""
    assert reading_.text == "[page 1]\nQuarterly numbers\n\n[page 2]\nCosts went down\n\n[page 3]\nThe end"


def test_a_pdf_named_anything_is_still_a_pdf(tmp_path):
    path = write(tmp_path / "notes.txt", pdf_with_pages(["hidden pdf"]))

    assert sniffed(path) == "application/pdf"
    assert "hidden pdf" in read(path).text


def test_a_very_long_pdf_stops_at_the_page_limit_and_reports_progress(tmp_path):
    path = write(tmp_path / "long.pdf", pdf_with_pages([f"page {number}" for number in range(1, 2101)]))
    seen = []

    reading_ = read(path, progress=seen.append)

    assert reading_.pages == 2000
    assert "2,000 pages" in reading_.stopped and "2,100" in reading_.stopped
    assert "[page 2000]\npage 2000" in reading_.text
    assert "[page 2001]" not in reading_.text
    assert seen == sorted(set(seen)) and seen[0] == 10 and seen[-1] == 2000


def test_progress_ends_with_the_pages_read(tmp_path):
    path = write(tmp_path / "short.pdf", pdf_with_pages([f"page {number}" for number in range(1, 14)]))
    seen = []

    read(path, progress=seen.append)

    assert seen == [10, 13]


def test_a_pdf_stops_at_the_character_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_CHARS", 40)
    path = write(tmp_path / "wordy.pdf", pdf_with_pages(["a" * 30, "b" * 30, "c" * 30]))

    reading_ = read(path)

    assert len(reading_.text) <= 40
    assert reading_.stopped == "stopped at 40 characters"
    assert "c" not in reading_.text


def test_a_pdf_with_a_password_is_refused(tmp_path):
    path = write(tmp_path / "locked.pdf", encrypted_pdf("secret"))

    assert unreadable_reason(path) == "encrypted PDF"


def test_a_pdf_encrypted_with_an_empty_password_is_read(tmp_path):
    path = write(tmp_path / "no-print.pdf", encrypted_pdf(""))

    assert read(path).text == "[page 1]\nbehind a lock"


def test_a_truncated_pdf_is_damaged(tmp_path):
    whole = pdf_with_pages(["one", "two"])
    path = write(tmp_path / "cut.pdf", whole[: len(whole) // 2])

    assert "damaged" in unreadable_reason(path)


def test_a_pdf_without_text_says_it_may_be_scanned(tmp_path):
    path = write(tmp_path / "scan.pdf", pdf_with_pages(["", ""]))

    assert unreadable_reason(path) == "no text in this PDF (scanned pages?)"


# ------------------------------------------------------------------------------ DOCX and XLSX


def make_docx(path):
    document = docx.Document()
    document.add_paragraph("Minutes of the meeting")
    table = document.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, [("Item", "Owner"), ("Budget", "Ada")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.save(path)
    return path


def test_a_docx_gives_its_paragraphs_and_table_rows(tmp_path):
    path = make_docx(tmp_path / "minutes.docx")

    reading_ = read(path)

    assert sniffed(path) == DOCX
    assert reading_.text == "Minutes of the meeting\nItem\tOwner\nBudget\tAda"
    assert (reading_.pages, reading_.stopped) == (1, "")


def test_a_docx_stored_under_another_name_is_read(tmp_path):
    stored = tmp_path / "9f2c1e"
    stored.write_bytes(make_docx(tmp_path / "minutes.docx").read_bytes())

    assert "Budget\tAda" in read_text(stored, DOCX).text


def test_a_merged_cell_is_read_once(tmp_path):
    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 2)).text = "Heading across"
    for cell, value in zip(table.rows[1].cells, ("a", "b", "c"), strict=True):
        cell.text = value
    path = tmp_path / "merged.docx"
    document.save(path)

    assert read(path).text == "Heading across\na\tb\tc"


def test_random_bytes_named_docx_are_not_a_docx(tmp_path):
    path = write(tmp_path / "fake.docx", random.Random(1).randbytes(5000))

    assert sniffed(path) == "application/octet-stream"
    assert unreadable_reason(path, DOCX) == "not a valid DOCX file"


def test_a_zip_without_a_document_is_not_a_docx(tmp_path):
    path = tmp_path / "empty.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "hello")

    assert sniffed(path) == DOCX
    assert unreadable_reason(path) == "not a valid DOCX file"


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(tmp_path):
    path = tmp_path / "bomb.docx"
    chunk = bytes(1024 * 1024)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(chunk)
    assert path.stat().st_size < 2 * 1024 * 1024

    started = time.perf_counter()
    reason = unreadable_reason(path)

    assert "decompression bomb" in reason
    assert time.perf_counter() - started < 0.5


def test_a_small_member_that_inflates_too_far_is_a_bomb_too(tmp_path):
    path = tmp_path / "sheet.xlsx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", bytes(20 * 1024 * 1024))

    assert "decompression bomb" in unreadable_reason(path)


def test_an_xlsx_gives_each_sheet_with_its_rows(tmp_path):
    workbook = openpyxl.Workbook()
    people = workbook.active
    people.title = "People"
    people.append(["name", "age"])
    people.append(["Ada", 36])
    people.append([])
    people.append(["Bob", 41.0])
    costs = workbook.create_sheet("Costs")
    costs.append(["rent", 1200.5, None, "paid"])
    path = tmp_path / "book.xlsx"
    workbook.save(path)

    reading_ = read(path)

    assert sniffed(path) == XLSX
    assert reading_.text == "[sheet People]\nname\tage\nAda\t36\nBob\t41\n\n[sheet Costs]\nrent\t1200.5\t\tpaid"
    assert (reading_.pages, reading_.stopped) == (2, "")


def test_a_long_sheet_stops_at_the_row_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_SHEET_ROWS", 5)
    workbook = openpyxl.Workbook()
    for number in range(1, 9):
        workbook.active.append([number])
    path = tmp_path / "long.xlsx"
    workbook.save(path)

    reading_ = read(path)

    assert reading_.text.splitlines()[1:] == ["1", "2", "3", "4", "5"]
    assert "5 rows" in reading_.stopped


def test_a_docx_is_not_an_xlsx(tmp_path):
    path = make_docx(tmp_path / "minutes.docx")

    assert unreadable_reason(path, XLSX) == "not a valid XLSX file"


# ------------------------------------------------------------------------------- HTML and SVG


PAGE = b"""<!DOCTYPE html>
<html><head><title>Notice</title><style>body { color: red }</style></head>
<body>
  <p>First   paragraph.</p><script>alert(1)</script>
  <div>Second &amp; last</div><noscript>turn on scripts</noscript>
  <table><tr><td>a</td><td>b</td></tr></table>
</body></html>
"""


def test_html_gives_the_words_a_reader_sees_and_never_scripts_or_styles(tmp_path):
    path = write(tmp_path / "page.html", PAGE)

    text = read(path).text

    assert sniffed(path) == "text/html"
    assert text == "Notice\n\nFirst paragraph.\n\nSecond & last\n\na\tb"
    for hidden in ("alert", "color", "turn on scripts"):
        assert hidden not in text


def test_html_named_as_text_is_still_html(tmp_path):
    path = write(tmp_path / "innocent.txt", b"\xef\xbb\xbf  \n<HTML><body><p>hi</p><script>x()</script>")

    assert sniffed(path) == "text/html"
    assert read(path).text == "hi"


def test_svg_is_an_image_that_is_not_read(tmp_path):
    plain = write(tmp_path / "logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>x()</script></svg>')
    prolog = write(tmp_path / "drawing.png", b'<?xml version="1.0"?>\n<!-- made by hand -->\n<SVG></SVG>')

    assert sniffed(plain) == sniffed(prolog) == "image/svg+xml"
    assert "image/svg+xml" not in IMAGE_TYPES
    assert unreadable_reason(plain) == "an SVG image: not read"


# ---------------------------------------------------------------------------- images, binaries


def test_an_image_is_sniffed_from_its_bytes_and_has_no_text(tmp_path):
    path = tmp_path / "photo.txt"
    Image.new("RGB", (4, 4), "red").save(path, format="PNG")

    assert sniffed(path) == "image/png"
    assert unreadable_reason(path) == "an image: no text to read"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"PK\x03\x04\x14\x00", "application/zip"),
    ],
)
def test_types_are_told_by_their_first_bytes(head, expected):
    assert sniff(head + bytes(100), "anything.md") == expected


def test_random_bytes_are_a_binary_file(tmp_path):
    path = write(tmp_path / "data.txt", random.Random(2).randbytes(8192))

    assert sniffed(path) == "application/octet-stream"
    assert unreadable_reason(path) == "binary file"


# ------------------------------------------------------------------------------------------ text


def test_utf8_text_with_a_bom_reads_back_exactly(tmp_path):
    words = "Größe, naïve café — 東京 and emoji 🎉\nsecond line\n"
    path = write(tmp_path / "notes.txt", b"\xef\xbb\xbf" + words.encode())

    reading_ = read(path)

    assert sniffed(path) == "text/plain"
    assert reading_ == Reading(text=words, pages=1, stopped="")


def test_a_multibyte_character_cut_at_the_end_of_the_head_is_still_text():
    head = ("é" * 4096).encode()[:8191]

    assert sniff(head, "notes.md") == "text/markdown"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("script.py", "text/x-source"),
        ("Main.JAVA", "text/x-source"),
        ("table.csv", "text/csv"),
        ("data.json", "application/json"),
        ("README.markdown", "text/markdown"),
        ("notes", "text/plain"),
    ],
)
def test_text_kinds_are_told_by_the_name(name, expected):
    assert sniff(b'print("hello")\n', name) == expected


def test_a_text_file_past_the_limit_is_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_CHARS", 1000)
    path = write(tmp_path / "big.py", b"x = 1\n" * 10_000)

    reading_ = read(path)

    assert sniffed(path) == "text/x-source"
    assert len(reading_.text) == 1000
    assert reading_.stopped == "stopped at 1,000 characters"


def test_csv_reads_as_it_is(tmp_path):
    path = write(tmp_path / "table.csv", b"name,age\nAda,36\n")

    assert read(path).text == "name,age\nAda,36\n"


# ---------------------------------------------------------------------------------- passages


def document_with_pages(page_count: int, sentences_per_page: int, seed: int = 3) -> tuple[str, list[str]]:
    """Text as read_text gives a PDF: page markers, paragraphs of numbered sentences of many lengths."""
    chooser = random.Random(seed)
    sentences = []
    pages = []
    for page in range(1, page_count + 1):
        paragraphs = []
        paragraph = []
        for _ in range(sentences_per_page):
            words = " ".join(chooser.choices(["alpha", "beta", "gamma", "delta", "x"], k=chooser.randint(1, 18)))
            sentences.append(f"Sentence {len(sentences)} says {words}.")
            paragraph.append(sentences[-1])
            if chooser.random() < 0.2:
                paragraphs.append(" ".join(paragraph))
                paragraph = []
        paragraphs.append(" ".join(paragraph))
        pages.append(f"[page {page}]\n" + "\n\n".join(p for p in paragraphs if p))
    return "\n\n".join(pages), sentences


def test_passages_hold_every_sentence_whole_and_stay_near_their_size():
    text, sentences = document_with_pages(page_count=12, sentences_per_page=40)

    passages = [passage for _, passage in split_passages(text, size=1200, overlap=150)]

    assert len(passages) > 10
    assert all(len(passage) <= 1.5 * 1200 for passage in passages)
    assert all(len(passage) >= 300 for passage in passages[:-1])
    assert [sentence for sentence in sentences if not any(sentence in passage for passage in passages)] == []


def test_passages_carry_the_page_they_start_on():
    text, _ = document_with_pages(page_count=8, sentences_per_page=30)
    markers = [(match.start(), int(match.group(1))) for match in re.finditer(r"^\[page (\d+)\]$", text, re.M)]

    passages = split_passages(text, size=500, overlap=80)

    for page, passage in passages:
        offset = text.index(passage[:80])
        assert page == max(number for start, number in markers if start <= offset)
    assert {page for page, _ in passages} == set(range(1, 9))


def test_passages_without_page_markers_are_on_page_one():
    assert split_passages("Just one short note.") == [(1, "Just one short note.")]
    assert all(page == 1 for page, _ in split_passages("word " * 2000))


def test_blank_text_has_no_passages():
    assert split_passages("") == []
    assert split_passages(" \n\n \t\n") == []


def test_text_without_any_break_is_still_cut_to_size():
    passages = split_passages("x" * 5000, size=1000, overlap=100)

    assert all(len(passage) <= 1000 for _, passage in passages)
    assert "".join(passage for _, passage in passages).count("x") >= 5000


def test_two_million_characters_split_in_about_a_second():
    text, _ = document_with_pages(page_count=2000, sentences_per_page=18)
    text = (text * (2_000_000 // len(text) + 1))[:2_000_000]

    started = time.perf_counter()
    passages = split_passages(text)
    elapsed = time.perf_counter() - started

    assert len(passages) > 1500
    assert elapsed < 2


def test_unusable_sizes_are_refused():
    with pytest.raises(ValueError):
        split_passages("text", size=100, overlap=60)


def test_a_file_that_is_not_there_is_an_error_of_ours_not_an_unreadable_file(tmp_path):
    for content_type in ("text/plain", "application/pdf", DOCX):
        with pytest.raises(FileNotFoundError):
            read_text(tmp_path / "gone", content_type)
