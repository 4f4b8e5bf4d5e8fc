"""The hub behind PgBouncer in transaction mode (docs/operations.md, "Scaling").

PgBouncer, from Debian's package, is started by the test on a free port in front of the test
database with a pool of POOL_SIZE server connections. A real hub (`runhub`: Daphne, its worker
with TURNS threads, beat) connects through it with HUB_DB_TRANSACTION_POOLING=true, and TURNS
tabs each send a message at once. Every reply streams to its exact end while PostgreSQL never
serves more than POOL_SIZE connections for the hub's many: a turn holds its client connection
for its whole length but a server connection only for each short transaction. The
setting also turns off the server-side cursors a pooler would break.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from tests.chaos.cluster import free_port
from tests.redis_production.conftest import USER_PASSWORD, open_tab, read_reply, running_hub

pytestmark = [pytest.mark.needs_postgres, pytest.mark.needs_redis, pytest.mark.serial,
              pytest.mark.django_db(transaction=True)]

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
POOL_SIZE = 3
TURNS = 8
REPLY = "Pooled {prompt}: every word of this reply crossed PgBouncer in transaction mode."


class PgBouncer:
    """pgbouncer in transaction mode on a free port of 127.0.0.1, for the test server's databases."""

    def __init__(self):
        # Its own directory: pgbouncer refuses to run as root and reads its files as postgres.
        self.dir = Path(tempfile.mkdtemp(prefix="hub-pgbouncer-"))
        self.dir.chmod(0o755)
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> "PgBouncer":
        database = settings.DATABASES["default"]
        ini = self.dir / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={database.get('HOST') or '127.0.0.1'} port={database.get('PORT') or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'users.txt'}\nadmin_users = {self.user}\n"
            f"pool_mode = transaction\ndefault_pool_size = {POOL_SIZE}\nmax_client_conn = 500\n")
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        as_postgres = ["-u", "postgres"] if os.geteuid() == 0 else []
        with open(self.dir / "pgbouncer.log", "wb") as log:  # it logs to stderr
            self.process = subprocess.Popen([PGBOUNCER, *as_postgres, str(ini)], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 15
        while not self._answers():
            assert self.process.poll() is None, f"pgbouncer exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"pgbouncer did not answer:\n{self.log()}"
            time.sleep(0.1)
        return self

    @property
    def user(self) -> str:
        return settings.DATABASES["default"].get("USER") or "postgres"

    def database_url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{settings.DATABASES['default']['NAME']}"

    def pool(self) -> dict:
        """The hub database's pool as SHOW POOLS reports it (the console speaks simple queries only)."""
        with self._console() as console:
            cursor = console.execute("SHOW POOLS")
            names = [column.name for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return next((row for row in rows if row["database"] == settings.DATABASES["default"]["NAME"]), {})

    def _console(self):
        return psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user=self.user,
                               autocommit=True, cursor_factory=psycopg.ClientCursor, connect_timeout=2)

    def _answers(self) -> bool:
        try:
            with self._console():
                return True
        except psycopg.OperationalError:
            return False

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def bouncer():
    bouncer = PgBouncer().start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def writer(user, make_agent, real_password_hashers):
    user.set_password(USER_PASSWORD)
    user.save()
    agent = make_agent(user, name="Pooled", model="test:scripted",
                       settings={"script": {"reply": REPLY, "chunk": 6, "delay": 0.08}})
    return {"username": user.username, "agent": agent}


class PoolWatch:
    """The most client and server connections the pool had while the block ran."""

    def __init__(self, bouncer: PgBouncer):
        self.bouncer, self.most_clients, self.most_servers = bouncer, 0, 0
        self.stopped = threading.Event()

    @contextlib.contextmanager
    def watching(self):
        thread = threading.Thread(target=self._sample)
        thread.start()
        try:
            yield self
        finally:
            self.stopped.set()
            thread.join()

    def _sample(self) -> None:
        while not self.stopped.wait(0.05):
            pool = self.bouncer.pool()
            servers = sum(pool.get(k, 0) for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
            self.most_clients = max(self.most_clients, pool.get("cl_active", 0) + pool.get("cl_waiting", 0))
            self.most_servers = max(self.most_servers, servers)


def converse(base: str, writer: dict, n: int) -> tuple[list[str], dict]:
    with open_tab(base, writer, f"Pooled chat {n}") as tab:
        tab.send(json.dumps({"type": "message.send", "content": f"turn {n}", "client_id": f"c-{n}"}))
        return read_reply(tab)


def test_more_replies_stream_at_once_than_pgbouncer_has_server_connections(tmp_path, bouncer, redis_server, writer):
    env = {"REDIS_URL": redis_server.url(2), "DATABASE_URL": bouncer.database_url(),
           "HUB_DB_TRANSACTION_POOLING": "true"}
    with running_hub(tmp_path, env, concurrency=TURNS) as (base, log):
        with PoolWatch(bouncer).watching() as watch, ThreadPoolExecutor(TURNS) as tabs:
            replies = list(tabs.map(lambda n: converse(base, writer, n), range(TURNS)))
        output = log.read_text(errors="replace")

    for n, (deltas, settled) in enumerate(replies):
        assert settled["content"] == REPLY.format(prompt=f"turn {n}")
        assert len(deltas) >= 5 and "".join(deltas) == settled["content"]  # streamed, no gap or repeat
    assert watch.most_servers <= POOL_SIZE, "PgBouncer opened more server connections than its pool"
    assert watch.most_clients > POOL_SIZE, "the hub never held more connections than PostgreSQL served"
    assert "Traceback" not in output, output[-3000:]
    assert "does not exist" not in bouncer.log()


def test_behind_a_transaction_pooler_the_hub_declares_no_server_side_cursor(monkeypatch):
    """Django's .iterator() would declare a cursor and fetch from it in later transactions, which
    PgBouncer may hand to another server connection, where the cursor does not exist."""
    from hub.environment import database_from_url

    url = "postgres://hub@db.internal:6432/hub"
    assert database_from_url(url)["DISABLE_SERVER_SIDE_CURSORS"] is False  # PostgreSQL itself: they are fine
    monkeypatch.setenv("HUB_DB_TRANSACTION_POOLING", "true")
    assert database_from_url(url)["DISABLE_SERVER_SIDE_CURSORS"] is True
