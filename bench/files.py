"""Files: uploading, reading a PDF's text, and live replies while PDFs are read, as a user feels it.

The production layout on one machine (bench.live_hub: Daphne, two Celery workers, a private
PostgreSQL and Redis). A user with a logged-in session opens a chat's page, as a browser does, for
its CSRF token and cookie, and its websocket, where the page hears `file.updated`. Measured:

* upload: POST /chats/<id>/files/ (multipart, field `file`, the X-CSRFToken header the page's
  upload sends) of random bytes (as incompressible as a zip or a photo) of each size in
  UPLOAD_SIZES_MB, timed from the request's start to the whole 201 answer (the chip's upload
  done). Median seconds and MB/s (MB = 2**20 bytes, as HUB_MAX_UPLOAD_MB counts) per size over
  UPLOAD_ROUNDS, after one untimed upload. Between uploads the benchmark waits, untimed, for the
  hub to finish reading the file (binary: unreadable) and takes it off the composer.
* reading a PDF: a PDF of PDF_PAGES pages of about 2,000 characters each is uploaded; timed from
  the upload's answer to the `file.updated` event that says it is read (the chip turning to
  "read"), and its legs: until the tab hears it is being read (the task picked up), then until
  read. Median over EXTRACTION_ROUNDS, and pages per second.
* replies beside files: STREAMS scripted replies at once (bench.streaming's: 400 pieces at 50 a
  second), from the model's piece to the tab, in rounds of three kinds in turn: quiet; while
  READING_PDFS of those PDFs are being read (uploaded at once just before the replies are asked
  for, so their uploads are over by the first send, and each read in a child process of its own);
  and, in the first UPLOAD_STREAM_ROUNDS, while one file of the largest size is uploaded
  UPLOAD_AFTER_S into the replies. Each loaded round reports p50 and p99 over the whole round and
  over the deltas the tabs received while the PDFs were being read (from the tab's first
  "reading" to its "read") or the upload was in flight, beside the deltas of the quiet round
  before it in the same span after its first send (a round's start costs more than its middle),
  and how much of the round that span covered. Medians over rounds, and the ratios.

Runs in about two and a half minutes. Everything talks to 127.0.0.1 only.
"""

import asyncio
import contextlib
import json
import os
import random
import re
import statistics
import time

from bench import cpu, live_hub
from bench.live_hub import log
from bench.streaming import (
    make_streams,
    median_of,
    ms,
    no_client_collections,
    open_socket,
    percentile,
    stream_figures,
    stream_round,
)

MB = 1024 * 1024
UPLOAD_SIZES_MB = tuple(int(n) for n in os.environ.get("BENCH_FILES_SIZES_MB", "1,10,24").split(","))
UPLOAD_ROUNDS = int(os.environ.get("BENCH_FILES_UPLOAD_ROUNDS", "5"))
PDF_PAGES = 100
PAGE_CHARS = 2000
EXTRACTION_ROUNDS = int(os.environ.get("BENCH_FILES_EXTRACTION_ROUNDS", "5"))
STREAMS = 10
ROUNDS = int(os.environ.get("BENCH_FILES_ROUNDS", "4"))
# PDFs uploaded at once before a round's replies are asked for: each is read in a child process
# of its own, so these keep both cores busy for the first seconds of the replies.
READING_PDFS = int(os.environ.get("BENCH_FILES_READING_PDFS", "8"))
UPLOAD_STREAM_ROUNDS = int(os.environ.get("BENCH_FILES_UPLOAD_STREAM_ROUNDS", "2"))
UPLOAD_AFTER_S = 3.0  # into the replies, once every one is streaming
WORKERS = 2
CONCURRENCY = 16  # a reply holds a thread while it streams: STREAMS, the reads, and room to spare
DATABASE = "hub_bench_files"
SEED = 20260512
WAIT_SECONDS = 60  # for a file to be read, or to begin being read
DONE = ("read", "unreadable")
WORDS = (
    "the of and to in a is that for it as was with be by on not this are or from at which but have an they "
    "were there been one all we their has would when if so no will more other its into about than them can "
    "only out these two may first then any like now over such our even most made after also did many before "
    "must through back years where much way well down should because each just those people how too little "
    "state good very make world still own see work long get here between both life being under never day "
    "same another know while last might great old year off come since against go came right used take three "
    "report budget quarter customer team plan review cost market growth risk figure table section contract "
    "supplier delivery schedule project meeting decision policy service system data analysis result"
).split()


# --- The user, as a browser would be -------------------------------------------------------

def make_reader() -> dict:
    """A user of their own with a chat for files, and a logged-in session (Cookie header)."""
    from django.contrib.auth import get_user_model

    from chats.services import create_chat

    user = get_user_model().objects.create_user("files-reader", password=None)
    chat = create_chat(owner=user, title="Files")
    return {"chat_id": str(chat.pk), "cookie": live_hub.session_cookie(user)}


def page_headers(base: str, reader: dict) -> dict:
    """The chat page's CSRF cookie and token, as the page's upload sends them."""
    import httpx
    from django.conf import settings

    page = httpx.get(f"{base}/chats/{reader['chat_id']}/", headers={"Cookie": reader["cookie"]}, timeout=30)
    page.raise_for_status()
    token = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text).group(1)
    cookie = page.cookies[settings.CSRF_COOKIE_NAME]
    return {"Cookie": f"{reader['cookie']}; {settings.CSRF_COOKIE_NAME}={cookie}", "X-CSRFToken": token,
            "Origin": base, "Accept": "application/json"}


@contextlib.asynccontextmanager
async def browser(hub, reader: dict, headers: dict):
    """An HTTP client with the page's headers, and the chat's websocket heard by FileEvents."""
    import httpx

    async with httpx.AsyncClient(base_url=hub.base, headers=headers, timeout=120) as client:
        socket = await open_socket(hub.port, reader)
        events = FileEvents(socket)
        listening = asyncio.create_task(events.listen())
        try:
            yield client, events
        finally:
            listening.cancel()
            await socket.close()


async def upload(client, chat_id: str, name: str, data: bytes) -> tuple[dict, float, float]:
    """POST one file as the page does; (the file's JSON, sent, answered), on time.time()."""
    sent = time.time()
    answer = await client.post(f"/chats/{chat_id}/files/", files={"file": (name, data)})
    answered = time.time()
    if answer.status_code != 201:
        raise RuntimeError(f"upload of {name} answered {answer.status_code}: {answer.text[:300]}")
    return answer.json()["files"][0], sent, answered


class FileEvents:
    """The file.updated events of one chat's websocket, when the tab received them: per file, the
    first saying it is being read, and the one saying it is done (read or unreadable)."""

    def __init__(self, socket):
        self.socket = socket
        self.reading: dict[str, float] = {}
        self.done: dict[str, tuple[float, dict]] = {}
        self.changed = asyncio.Event()

    async def listen(self) -> None:
        async for raw in self.socket:
            received = time.time()
            event = json.loads(raw)
            if event.get("type") != "file.updated":
                continue
            shown = event["file"]
            if shown["text_status"] == "reading":
                self.reading.setdefault(shown["id"], received)
            elif shown["text_status"] in DONE:
                self.done.setdefault(shown["id"], (received, shown))
            self.changed.set()

    async def until(self, condition, what: str, timeout: float = WAIT_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"no file.updated event saying {what} within {timeout:.0f} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)


# --- Upload throughput ---------------------------------------------------------------------

async def upload_rounds(hub, reader: dict, headers: dict) -> dict:
    rng = random.Random(SEED)
    by_size = {}
    async with browser(hub, reader, headers) as (client, events):
        await one_upload(client, events, reader, rng.randbytes(MB), "warm-up.bin")
        for size in UPLOAD_SIZES_MB:
            data = rng.randbytes(size * MB)
            timed = [await one_upload(client, events, reader, data, f"archive-{size}mb.bin")
                     for _ in range(UPLOAD_ROUNDS)]
            seconds = [s for s, _ in timed]
            median = statistics.median(seconds)
            by_size[f"{size}_mb"] = {"median_s": round(median, 3), "median_mb_per_s": round(size / median, 1),
                                     "each_s": [round(s, 3) for s in seconds],
                                     "cpu_ms_per_mb": cpu_per_mb([used for _, used in timed], size)}
            log(f"upload {size} MB: median {median:.3f} s, {size / median:.1f} MB/s")
    return by_size


async def one_upload(client, events: FileEvents, reader: dict, data: bytes, name: str) -> tuple[float, dict]:
    """Seconds from the request's start to its whole answer, and the CPU seconds each role used
    meanwhile. Then, untimed, the hub reads the file and it is taken off the composer, so the next
    upload meets a quiet hub."""
    before = cpu.snapshot()
    shown, sent, answered = await upload(client, reader["chat_id"], name, data)
    used = cpu_seconds(before, cpu.snapshot())
    if shown["size"] != len(data):
        raise RuntimeError(f"{name}: the hub stored {shown['size']} bytes of {len(data)}")
    await events.until(lambda: shown["id"] in events.done, f"{name} was read")
    removed = await client.post(f"/files/{shown['id']}/remove/")
    removed.raise_for_status()
    return answered - sent, used


def cpu_seconds(before, after) -> dict:
    used = cpu.cores_used(before, after)
    return {} if used is None else {role: cores * (after[0] - before[0]) for role, cores in used["cores"].items()}


def cpu_per_mb(used: list[dict], size_mb: int) -> dict:
    """CPU milliseconds per MB uploaded, by role (Daphne's: receiving, parsing and storing the body)."""
    roles = used[0].keys() if used else ()
    return {role: round(sum(u[role] for u in used) * 1000 / (size_mb * len(used)), 1) for role in roles}


# --- Reading a PDF ---------------------------------------------------------------------------

def page_lines(rng: random.Random) -> list[str]:
    """About PAGE_CHARS characters of sentences, in lines of at most 75 characters."""
    lines, line, size = [], [], 0
    while size < PAGE_CHARS:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))).capitalize() + "."
        for word in sentence.split():
            if line and len(" ".join(line)) + 1 + len(word) > 75:
                lines.append(" ".join(line))
                size += len(lines[-1]) + 1
                line = []
            line.append(word)
    return [*lines, " ".join(line)] if line else lines


def report_pdf(pages: int = PDF_PAGES) -> bytes:
    """A PDF of `pages` pages of text, each line set by a text operator of its own as a typesetter
    writes them (tests.chats.test_reading.pdf_with_pages sets a page's text in one string; its
    lines are joined here by the operators that end one line and move to the next)."""
    from tests.chats.test_reading import pdf_with_pages

    rng = random.Random(SEED)
    return pdf_with_pages([") Tj 0 -14 Td (".join(page_lines(rng)) for _ in range(pages)])


async def extraction_rounds(hub, reader: dict, headers: dict, pdf: bytes) -> dict:
    """The PDF uploaded and read EXTRACTION_ROUNDS times, one after another, after one untimed."""
    rounds = []
    async with browser(hub, reader, headers) as (client, events):
        await read_one(client, events, reader, pdf)  # warm-up
        for index in range(EXTRACTION_ROUNDS):
            rounds.append(await read_one(client, events, reader, pdf))
            log(f"PDF read {index + 1}/{EXTRACTION_ROUNDS}: {rounds[-1]['answered_to_read_s']} s")
    median = statistics.median(r["answered_to_read_s"] for r in rounds)
    return {"pages": rounds[0]["pages"], "pdf_kb": round(len(pdf) / 1024), "text_status": rounds[0]["text_status"],
            "answered_to_read_median_s": round(median, 3),
            "answered_to_reading_median_s": round(statistics.median(r["answered_to_reading_s"] for r in rounds), 3),
            "reading_to_read_median_s": round(statistics.median(r["reading_to_read_s"] for r in rounds), 3),
            "upload_median_s": round(statistics.median(r["upload_s"] for r in rounds), 3),
            "pages_per_second": round(rounds[0]["pages"] / median, 1),
            "answered_to_read_each_s": [r["answered_to_read_s"] for r in rounds]}


async def read_one(client, events: FileEvents, reader: dict, pdf: bytes) -> dict:
    """One PDF uploaded; from its answer to the tab hearing it is read (and the legs)."""
    shown, sent, answered = await upload(client, reader["chat_id"], "report.pdf", pdf)
    await events.until(lambda: shown["id"] in events.done, "report.pdf was read")
    read_at, final = events.done[shown["id"]]
    reading_at = events.reading.get(shown["id"], read_at)
    return {"upload_s": round(answered - sent, 3), "answered_to_read_s": round(read_at - answered, 3),
            "answered_to_reading_s": round(reading_at - answered, 3),
            "reading_to_read_s": round(read_at - reading_at, 3),
            "pages": final["pages"], "text_status": final["text_status"]}


# --- Replies while PDFs are read, or while a file is uploaded -------------------------------

async def reading_round(hub, reader: dict, headers: dict, streams: list[dict], pdf: bytes):
    """READING_PDFS PDFs uploaded at once and being read before the replies are asked for: the
    upload itself is over when the round begins. (watches, when each PDF was being read)."""
    async with browser(hub, reader, headers) as (client, events):
        answers = await asyncio.gather(*(upload(client, reader["chat_id"], "report.pdf", pdf)
                                         for _ in range(READING_PDFS)))
        ids = [shown["id"] for shown, _, _ in answers]
        await events.until(lambda: all(i in events.reading or i in events.done for i in ids), "every PDF is read")
        watches = await stream_round(hub.port, streams)
        await events.until(lambda: all(i in events.done for i in ids), "every PDF was read")
    return watches, [(events.reading.get(i, events.done[i][0]), events.done[i][0]) for i in ids]


async def upload_round(hub, reader: dict, headers: dict, streams: list[dict], data: bytes):
    """One file of the largest size uploaded UPLOAD_AFTER_S into the replies; (watches, when the
    upload was in flight). Then, untimed, it is read and taken off again."""
    async with browser(hub, reader, headers) as (client, events):
        async def upload_later():
            await asyncio.sleep(UPLOAD_AFTER_S)
            return await upload(client, reader["chat_id"], "archive.bin", data)

        later = asyncio.create_task(upload_later())
        watches = await stream_round(hub.port, streams)
        shown, sent, answered = await later
        await events.until(lambda: shown["id"] in events.done, "archive.bin was read")
        (await client.post(f"/files/{shown['id']}/remove/")).raise_for_status()
    return watches, [(sent, answered)]


def first_send(watches: list[dict]) -> float:
    return min(w["sent"] for w in watches)


def within(watches: list[dict], windows: list[tuple[float, float]], key: str = "latencies") -> list[float]:
    """The latencies (or from_send) of the deltas the tabs received inside any of the windows."""
    return [value for w in watches for received, value in zip(w["received"], w[key], strict=True)
            if any(start <= received <= end for start, end in windows)]


def span_figures(watches: list[dict], windows: list[tuple[float, float]], quiet: list[dict]) -> dict:
    """Latency of the deltas received inside the windows, and of the quiet round's deltas in the
    same span after its first send (the same part of a round: its start costs more than its middle)."""
    shift = first_send(quiet) - first_send(watches)
    during, same = within(watches, windows), within(quiet, [(a + shift, b + shift) for a, b in windows])
    return {"deltas_during": len(during), "during_p50_ms": ms(percentile(during, 50)),
            "during_p99_ms": ms(percentile(during, 99)), "during_max_ms": ms(max(during) if during else None),
            "during_from_send_p99_ms": ms(percentile(within(watches, windows, "from_send"), 99)),
            "quiet_same_span_p50_ms": ms(percentile(same, 50)), "quiet_same_span_p99_ms": ms(percentile(same, 99)),
            "quiet_same_span_max_ms": ms(max(same) if same else None), **overlap_figures(watches, windows)}


def overlap_figures(watches: list[dict], windows: list[tuple[float, float]]) -> dict:
    """How long the windows were, and how much of the span of the round's deltas they covered."""
    firsts, lasts = [w["first"] for w in watches if w["first"]], [w["last"] for w in watches if w["last"]]
    if not firsts:
        return {"overlap": None}
    start, end = min(firsts), max(lasts)
    covered, reach = 0.0, start
    for began, ended in sorted(windows):
        began, ended = max(began, reach), min(ended, end)
        if ended > began:
            covered += ended - began
            reach = ended
    return {"window_s": round(max(b for _, b in windows) - min(a for a, _ in windows), 2),
            "overlap": round(covered / (end - start), 2) if end > start else None,
            "at_first_send": sum(a <= first_send(watches) < b for a, b in windows)}


def round_figures(watches: list[dict], used) -> dict:
    figures = stream_figures(watches)
    kept = {key: figures[key] for key in ("streams_complete", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
                                          "from_send_p99_ms", "first_word_p99_s")}
    if used is not None:
        kept["cpu_cores"], kept["machine_busy"] = used["cores"], used["machine_busy"]
    return kept


def streams_round(hub, streams: list[dict], *, load=None, quiet: list[dict] | None = None):
    """One round of the streams: quiet (load None), or beside load(), a coroutine function of the
    streams giving (watches, windows). (figures, watches)."""
    before = cpu.snapshot()
    with no_client_collections():
        if load is None:
            watches, windows = asyncio.run(stream_round(hub.port, streams)), None
        else:
            watches, windows = asyncio.run(load(streams))
    figures = round_figures(watches, cpu.cores_used(before, cpu.snapshot()))
    if windows is not None:
        figures.update(span_figures(watches, windows, quiet))
    return figures, watches


def summary(rounds: list[dict]) -> dict:
    """Medians over rounds (the cores by role too), plus every round's p99."""
    result = {}
    for key, value in rounds[0].items():
        if isinstance(value, dict):
            result[key] = {role: median_of([r[key] for r in rounds], role) for role in value}
        else:
            result[key] = median_of(rounds, key)
    result["streams_complete"] = [r["streams_complete"] for r in rounds]
    result["latency_p99_ms_each_round"] = [r["latency_p99_ms"] for r in rounds]
    if "during_p99_ms" in rounds[0]:
        result["during_p99_ms_each_round"] = [r["during_p99_ms"] for r in rounds]
    return result


def ratio(over: float | None, under: float | None) -> float | None:
    return round(over / under, 2) if over and under else None


def compared(quiet: dict, loaded: dict) -> dict:
    return {"p50_ms": [quiet["latency_p50_ms"], loaded["latency_p50_ms"]],
            "p99_ms": [quiet["latency_p99_ms"], loaded["latency_p99_ms"]],
            "p99_ratio": ratio(loaded["latency_p99_ms"], quiet["latency_p99_ms"]),
            "during_p50_ms": [loaded["quiet_same_span_p50_ms"], loaded["during_p50_ms"]],
            "during_p99_ms": [loaded["quiet_same_span_p99_ms"], loaded["during_p99_ms"]],
            "during_p50_ratio": ratio(loaded["during_p50_ms"], loaded["quiet_same_span_p50_ms"]),
            "during_p99_ratio": ratio(loaded["during_p99_ms"], loaded["quiet_same_span_p99_ms"])}


def streaming_rounds(hub, streams: list[dict], reader: dict, headers: dict, pdf: bytes) -> dict:
    """Quiet and loaded rounds in turn, so a change in the machine's other work falls on both; each
    loaded round is compared with the quiet round before it."""
    big = random.Random(SEED).randbytes(max(UPLOAD_SIZES_MB) * MB)
    kinds = {"reading": lambda s: reading_round(hub, reader, headers, s, pdf),
             "uploading": lambda s: upload_round(hub, reader, headers, s, big)}
    rounds = {"quiet": [], "reading": [], "uploading": []}
    for index in range(ROUNDS):
        log(f"N={len(streams)}: quiet, then while {READING_PDFS} PDFs are read; round {index + 1}/{ROUNDS}")
        figures, quiet = streams_round(hub, streams)
        rounds["quiet"].append(figures)
        for kind in ("reading", "uploading")[: 1 + (index < UPLOAD_STREAM_ROUNDS)]:
            rounds[kind].append(streams_round(hub, streams, load=kinds[kind], quiet=quiet)[0])
            log(f"  {kind}: p99 {rounds[kind][-1]['during_p99_ms']} ms while it lasted "
                f"({rounds[kind][-1]['window_s']} s), {rounds[kind][-1]['quiet_same_span_p99_ms']} ms quiet")
    result = {kind: summary(figures) for kind, figures in rounds.items()}
    for kind in ("reading", "uploading"):
        result[kind]["compared_with_quiet"] = compared(result["quiet"], result[kind])
    return result


def run() -> dict:
    began = time.monotonic()
    speed = cpu.python_speed_ms()
    log(f"a million Python additions take {speed} ms on this machine now")
    pdf = report_pdf()
    with live_hub.running_hub(database=DATABASE, workers=WORKERS, concurrency=CONCURRENCY) as hub:
        live_hub.setup_django(hub.env)
        streams = make_streams(STREAMS)
        reader = make_reader()
        live_hub.close_django_connections()
        live_hub.wait_for_workers(hub, WORKERS)
        headers = page_headers(hub.base, reader)
        log("warming up (imports, connections)")
        asyncio.run(stream_round(hub.port, streams[:2]))
        uploads = asyncio.run(upload_rounds(hub, reader, headers))
        extraction = asyncio.run(extraction_rounds(hub, reader, headers, pdf))
        streaming = streaming_rounds(hub, streams, reader, headers, pdf)
    return {
        "config": {"upload_sizes_mb": list(UPLOAD_SIZES_MB), "upload_rounds": UPLOAD_ROUNDS, "pdf_pages": PDF_PAGES,
                   "page_chars": PAGE_CHARS, "extraction_rounds": EXTRACTION_ROUNDS, "streams": STREAMS,
                   "rounds": ROUNDS, "reading_pdfs": READING_PDFS, "upload_stream_rounds": UPLOAD_STREAM_ROUNDS,
                   "upload_after_s": UPLOAD_AFTER_S, "workers": WORKERS, "threads_per_worker": CONCURRENCY,
                   "sessions": live_hub.SESSIONS,
                   "hub_settings": {key: value for key, value in hub.env.items() if key.startswith("HUB_")}},
        "python_speed_ms": speed,
        "upload": uploads,
        "pdf_reading": extraction,
        "streaming": streaming,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
