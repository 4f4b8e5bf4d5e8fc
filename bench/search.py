"""The directory at scale: 1,000,000 messages in 10,000 chats of 100 users, on PostgreSQL and SQLite.

For each backend a fresh database is migrated and loaded (users and chats through the ORM,
messages in bulk: COPY on PostgreSQL, one transaction of inserts on SQLite — the full-text index
is kept by the same index and triggers the hub uses), then three reads a user makes all day are
timed through the hub's own selectors:

* a message search across all of one user's chats (`chats.search.search_messages`),
* a directory page (`chats.selectors.directory_page`, the first page and a cursor page in turn),
* opening a chat: `chat_for_user` and its ChatView with the first page of messages.

Figures are p50 and p95 in milliseconds over SAMPLES calls, plus how long the data took to load.
The target is p95 at most 50 ms for each read, on PostgreSQL and on SQLite alike; each backend's
figures say whether it is met ("target").

Each backend runs in a process of its own (`python -m bench.search postgres|sqlite`), since Django
is configured once per process. BENCH_SEARCH_MESSAGES makes a smaller run for a quick look.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

from bench.live_hub import log

USERS = 100
CHATS_PER_USER = 100
MESSAGES = int(os.environ.get("BENCH_SEARCH_MESSAGES", "1000000"))
SAMPLES = 300
WARMUP = 30
TARGET_P95_MS = 50
SERVER = "postgres://postgres@127.0.0.1:5432"
DATABASE = "hub_bench_search"
BACKENDS = ("postgres", "sqlite")
BACKEND_TIMEOUT_SECONDS = 1500
SEED = 20261203


# --- Text that looks like chat: a Zipf-distributed vocabulary ------------------------------

def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Pronounceable made-up words, the most frequent first."""
    onsets = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "pl", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    codas = ["", "n", "r", "s", "t", "l", "nd", "st", "ck"]
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 3))
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(syllables)))
    return sorted(words, key=lambda w: (len(w), w))


class Writer:
    """Sentences drawn with Zipf weights (rank r has weight 1/r), as words are in real text."""

    def __init__(self, rng: random.Random, words: list[str]):
        self.rng, self.words = rng, words
        self.weights = [1 / rank for rank in range(1, len(words) + 1)]

    def text(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=self.rng.randint(low, high)))


# --- Loading --------------------------------------------------------------------------------

def load(writer: Writer, rng: random.Random) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from agents_app.models import Agent
    from chats.models import Chat, Thread

    started = time.monotonic()
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"bench{n:03d}", password="!") for n in range(USERS)]
    )
    agent = Agent.objects.filter(model="builtin:librarian").first()
    now = timezone.now()
    chats = Chat.objects.bulk_create([
        Chat(owner=user, title=writer.text(2, 5).capitalize(), description=writer.text(0, 8),
             created_at=now - timedelta(days=400), updated_at=now - timedelta(minutes=rng.randint(0, 500_000)))
        for user in users for _ in range(CHATS_PER_USER)
    ], batch_size=2000)
    # A third of the chats have a named thread beside the default one.
    threads = Thread.objects.bulk_create(
        [Thread(chat=chat, title=writer.text(2, 4)) for chat in chats[::3]], batch_size=2000
    )
    thread_of = {thread.chat_id: thread.pk for thread in threads}
    log(f"users, chats and threads in {time.monotonic() - started:.1f} s; now {MESSAGES:,} messages")

    per_chat = max(1, MESSAGES // len(chats))
    rows = message_rows(chats, per_chat, writer, rng, thread_of=thread_of, agent_id=agent.pk if agent else None)
    if connection.vendor == "postgresql":
        copy_messages(connection, rows)
    else:
        insert_messages(connection, rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    for chat in chats:  # previews as send_message leaves them
        chat.last_message_preview = writer.text(3, 10)
    Chat.objects.bulk_update(chats, ["last_message_preview"], batch_size=2000)
    return {"users": users, "chats": chats, "seconds": time.monotonic() - started}


def message_rows(chats, per_chat: int, writer: Writer, rng: random.Random, *, thread_of: dict, agent_id):
    """(chat, thread, sender user, sender agent, content, created) in id order: user and agent by turns."""
    from django.utils import timezone

    start = timezone.now() - timedelta(days=300)
    for n, chat in enumerate(chats):
        thread_id = thread_of.get(chat.pk)
        for i in range(per_chat):
            in_thread = thread_id if thread_id and i % 4 == 3 else None
            from_user = i % 2 == 0 or agent_id is None
            content = writer.text(4, 30) if from_user else writer.text(15, 80)
            yield (chat.pk, in_thread, chat.owner_id if from_user else None, None if from_user else agent_id,
                   content, start + timedelta(seconds=n * per_chat + i))


COLUMNS = (
    "chat_id, thread_id, sender_user_id, sender_agent_id, content, created_at, kind, subkind, format, data, status"
)
CONSTANTS = ("message", "", "markdown", "{}", "final")


def copy_messages(connection, rows) -> None:
    """COPY into chats_message: the GIN index is kept as rows arrive, as it is in use."""
    connection.ensure_connection()
    raw = connection.connection
    with raw.cursor() as cursor, cursor.copy(f"COPY chats_message ({COLUMNS}) FROM STDIN") as copy:
        for n, row in enumerate(rows, 1):
            copy.write_row(row + CONSTANTS)
            if n % 200_000 == 0:
                log(f"  {n:,} messages")
    raw.commit()


def insert_messages(connection, rows) -> None:
    """One transaction of batched inserts; the FTS5 triggers index every row."""
    from django.db import transaction

    placeholders = ", ".join(["%s"] * 11)
    batch = []
    with transaction.atomic(), connection.cursor() as cursor:
        for n, row in enumerate(rows, 1):
            created = row[5].isoformat(sep=" ")
            batch.append((row[0].hex, *row[1:5], created, *CONSTANTS))  # Django keeps UUIDs as hex here
            if len(batch) == 10_000:
                cursor.executemany(f"INSERT INTO chats_message ({COLUMNS}) VALUES ({placeholders})", batch)
                batch.clear()
            if n % 200_000 == 0:
                log(f"  {n:,} messages")
        if batch:
            cursor.executemany(f"INSERT INTO chats_message ({COLUMNS}) VALUES ({placeholders})", batch)


# --- Timing ---------------------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


def timed(call, samples: int) -> dict:
    for _ in range(WARMUP):
        call()
    durations = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        durations.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(percentile(durations, 50), 2), "p95_ms": round(percentile(durations, 95), 2)}


def measure(data: dict, writer: Writer, rng: random.Random) -> dict:
    from chats import search, selectors

    users, chats = data["users"], data["chats"]
    words = writer.words
    hits = []

    def a_search():
        # Mostly words of middling frequency, sometimes a common one, sometimes two words.
        rank = int(rng.paretovariate(0.6)) % len(words)
        query = words[rank] if rng.random() < 0.7 else f"{words[rank]} {rng.choice(words[:300])}"
        hits.append(len(search.search_messages(owner=rng.choice(users), query=query, limit=20)))

    cursors = {}

    def a_directory_page():
        user = rng.choice(users)
        page = selectors.directory_page(user=user, limit=50, before=cursors.get(user.pk))
        cursors[user.pk] = page.next_cursor if user.pk not in cursors else None

    def open_a_chat():
        chat = rng.choice(chats)
        found = selectors.chat_for_user(user=chat.owner, chat_id=chat.pk)
        view = selectors.chat_view(chat=found)
        assert view.messages, "a chat of the benchmark opened empty"

    figures = {
        "message_search": timed(a_search, SAMPLES),
        "directory_page": timed(a_directory_page, SAMPLES),
        "open_chat": timed(open_a_chat, SAMPLES),
    }
    figures["message_search"]["median_hits"] = sorted(hits)[len(hits) // 2]
    return figures


def target_check(figures: dict) -> dict:
    reads = ("message_search", "directory_page", "open_chat")
    return {**{f"{name}_p95_ms": figures[name]["p95_ms"] for name in reads}, "limit_p95_ms": TARGET_P95_MS,
            "met": all(figures[name]["p95_ms"] <= TARGET_P95_MS for name in reads)}


# --- One backend in this process ------------------------------------------------------------

def prepare_environment(backend: str, data_dir: str) -> None:
    os.environ.pop("REDIS_URL", None)
    os.environ.update(DJANGO_SETTINGS_MODULE="hub.settings", HUB_DATA_DIR=data_dir, DEBUG="false",
                      SECRET_KEY="bench-only-not-a-secret-" + "x" * 32, LOG_LEVEL="WARNING")
    if backend == "postgres":
        recreate_database()
        os.environ["DATABASE_URL"] = f"{SERVER}/{DATABASE}"
    else:
        os.environ.pop("DATABASE_URL", None)


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")


def drop_database() -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")


def run_backend(backend: str) -> dict:
    data_dir = tempfile.mkdtemp(prefix=f"hub-bench-{backend}-")
    try:
        prepare_environment(backend, data_dir)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        rng = random.Random(SEED)
        writer = Writer(rng, vocabulary(rng))
        log(f"{backend}: loading {USERS} users, {USERS * CHATS_PER_USER:,} chats, {MESSAGES:,} messages")
        data = load(writer, rng)
        log(f"{backend}: loaded in {data['seconds']:.0f} s; timing {SAMPLES} calls of each read")
        figures = measure(data, writer, rng)
        return {"messages": MESSAGES, "chats": len(data["chats"]), "users": len(data["users"]),
                "load_seconds": round(data["seconds"], 1), **figures, "target": target_check(figures)}
    finally:
        from django.db import connections

        connections.close_all()
        if backend == "postgres":
            drop_database()
        shutil.rmtree(data_dir, ignore_errors=True)


def run() -> dict:
    """Both backends, each in its own process; the figures keyed by backend."""
    results = {}
    for backend in BACKENDS:
        finished = subprocess.run([sys.executable, "-m", "bench.search", backend], stdout=subprocess.PIPE, text=True,
                                  timeout=BACKEND_TIMEOUT_SECONDS)
        if finished.returncode != 0:
            results[backend] = {"error": f"exited with status {finished.returncode} (see its output above)"}
        else:
            results[backend] = json.loads(finished.stdout)
    return results


if __name__ == "__main__":
    print(json.dumps(run_backend(sys.argv[1])))
