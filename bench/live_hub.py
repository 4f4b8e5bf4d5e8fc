"""A live hub for a benchmark: its own PostgreSQL, Redis DB 9, Daphne and Celery workers.

PostgreSQL: by default a private cluster, started for the benchmark on a free port and removed
after it, because every concurrent turn holds one database connection for its whole length: 100
concurrent turns need more than the 100 connections a stock server allows (the shared server at
127.0.0.1:5432 answers "too many clients" at N=100). BENCH_POSTGRES=postgres://user@host:port
uses that server instead, with a database created for the benchmark and dropped after it.

Everything listens on and talks to 127.0.0.1 only. running_hub() stops every process it started
(by its own pid), also when the benchmark fails, and keeps the logs of a failed run.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The venv's bin directory: `make bench` runs .venv/bin/python, beside daphne and celery.
BIN = Path(sys.executable).parent
# The private cluster's least connection limit: the benchmark's concurrent turns plus web and
# headroom (a benchmark with more turns asks for more).
PRIVATE_MAX_CONNECTIONS = 300
# Redis DB 9 is the benchmarks' own (tests use the low numbers); it is emptied before and after.
REDIS_URL = "redis://127.0.0.1:6379/9"
SETTINGS_MODULE = "hub.settings"
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 15


@dataclass
class Hub:
    env: dict
    port: int
    dsn: str
    log_dir: Path
    processes: dict = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"[bench {time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_env(*, dsn: str, data_dir: Path, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HUB_"))}
    env.update({
        "DATABASE_URL": dsn,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        # Every process must share the key: the bench signs the sessions that Daphne reads.
        "SECRET_KEY": "bench-only-not-a-secret-" + "x" * 32,
        "DEBUG": "false",  # DEBUG would keep every query in memory
        "ALLOWED_HOSTS": "127.0.0.1",
        "HUB_DATA_DIR": str(data_dir),
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "PORT": str(port),
    })
    # A hub setting to compare: BENCH_HUB_BACKGROUND_NICE=0 runs the hub with HUB_BACKGROUND_NICE=0.
    env.update({key.removeprefix("BENCH_"): value for key, value in os.environ.items() if key.startswith("BENCH_HUB_")})
    return env


def admin_sql(server: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5) as conn:
        for statement in statements:
            conn.execute(statement)


@contextlib.contextmanager
def benchmark_database(server: str, name: str):
    # FORCE: the bench's own Django connection may still be open at the end.
    admin_sql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        admin_sql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_bindir() -> Path:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not installed:
        raise RuntimeError("no initdb found for a private PostgreSQL; set BENCH_POSTGRES to a server to use")
    return installed[-1].parent


def as_postgres(argv: list) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the postgres user."""
    argv = [str(arg) for arg in argv]
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def private_postgres(connections: int = PRIVATE_MAX_CONNECTIONS):
    """A PostgreSQL cluster of our own on 127.0.0.1:<free port>; yields its URL without a database."""
    bindir, port = postgres_bindir(), free_port()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-pg-"))
    if os.geteuid() == 0:
        shutil.chown(home, "postgres", "postgres")
    data = home / "data"
    subprocess.run(as_postgres([bindir / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync",
                                "-E", "UTF8", "--no-locale"]), check=True, capture_output=True, timeout=120)
    options = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={home} "
               f"-c max_connections={max(connections, PRIVATE_MAX_CONNECTIONS)}")
    pg_ctl = [bindir / "pg_ctl", "-D", data, "-w", "-t", "60"]
    try:
        subprocess.run(as_postgres([*pg_ctl, "-l", home / "postgres.log", "-o", options, "start"]),
                       check=True, capture_output=True, timeout=90)
        yield f"postgres://postgres@127.0.0.1:{port}"
    finally:
        # Stops the postmaster this cluster's pid file names: the one started above, nothing else.
        subprocess.run(as_postgres([*pg_ctl, "-m", "fast", "stop"]), capture_output=True, timeout=90)
        shutil.rmtree(home, ignore_errors=True)


def flush_redis() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL, socket_timeout=5).flushdb()


def migrate(env: dict) -> None:
    result = subprocess.run([str(BIN / "python"), "manage.py", "migrate", "--noinput", "-v", "0"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{result.stderr[-3000:]}")


# Whether the hub's processes share this benchmark's session (one) or each start its own (each).
# Linux shares the CPU out between sessions first (autogroup) and only then by priority inside
# each, so HUB_BACKGROUND_NICE ranks a worker's turn starts below Daphne's event loop only when
# they share a session, as they do under one process manager (honcho running the Procfile) or in
# one container. "each" is how this benchmark ran before commit dfd2f64 (docs/performance.md).
SESSIONS = os.environ.get("BENCH_SESSIONS", "one")
if SESSIONS not in ("one", "each"):
    raise SystemExit(f"BENCH_SESSIONS={SESSIONS!r}: use one or each")


def spawn(hub: Hub, name: str, argv: list[str]) -> None:
    output = open(hub.log_dir / f"{name}.log", "w")  # closed in stop_all
    hub.processes[name] = (subprocess.Popen(argv, cwd=ROOT, env=hub.env, stdout=output, stderr=subprocess.STDOUT,
                                            start_new_session=SESSIONS == "each"), output)


def start_daphne(hub: Hub, *, name: str = "daphne", port: int | None = None) -> None:
    """A web process on hub.port, or another one on a port of its own (as behind a balancer)."""
    spawn(hub, name, [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port or hub.port), "hub.asgi:application"])


def start_workers(hub: Hub, *, workers: int, concurrency: int) -> None:
    for index in range(workers):
        spawn(hub, f"worker{index}", [
            str(BIN / "celery"), "-A", "hub", "worker", "--pool", "threads", "--concurrency", str(concurrency),
            "--loglevel", "WARNING", "-n", f"bench{index}@%h",
        ])


def check_alive(hub: Hub) -> None:
    for name, (process, _) in hub.processes.items():
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with status {process.returncode}")


def wait_until_served(hub: Hub, port: int | None = None) -> None:
    import httpx

    base = f"http://127.0.0.1:{port}" if port else hub.base
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        check_alive(hub)
        try:
            if httpx.get(f"{base}/login/", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"daphne did not serve the log-in page on {base} in time")


def wait_for_workers(hub: Hub, count: int) -> None:
    """Needs Django set up in this process (the Celery app reads its settings)."""
    from hub.celery import app

    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        check_alive(hub)
        if len(app.control.ping(timeout=1.0)) >= count:
            return
    raise RuntimeError(f"{count} Celery worker(s) did not answer a ping in time")


def stop_all(hub: Hub) -> None:
    """SIGTERM to each process this hub started (by pid), then SIGKILL to any still running."""
    for process, _ in hub.processes.values():
        if process.poll() is None:
            process.terminate()
    for name, (process, output) in hub.processes.items():
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            log(f"{name} did not stop on SIGTERM; killing pid {process.pid}")
            process.kill()
            process.wait(STOP_TIMEOUT_SECONDS)
        output.close()


def show_logs(hub: Hub, lines: int = 15) -> None:
    """The errors and the last lines of each process's log; the logs are kept for a closer look."""
    for name in hub.processes:
        text = (hub.log_dir / f"{name}.log").read_text(errors="replace").splitlines()
        errors = [line for line in text if any(word in line for word in ("Error", "Exception", "Traceback"))]
        log(f"--- {name}: {len(errors)} error lines (last 10), then its last {lines} lines:\n"
            + "\n".join(errors[-10:] + ["..."] + text[-lines:]))
    log(f"logs kept in {hub.log_dir}")


def setup_django(env: dict) -> None:
    """Configure this process like the hub's processes, so services write to the same database."""
    import django

    for key in [k for k in os.environ if k.startswith(("DJANGO_", "HUB_"))]:
        del os.environ[key]
    os.environ.update(env)
    django.setup()


def session_cookie(user) -> str:
    """A logged-in session for user, as the log-in view would store it, as a Cookie header."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY

    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


@contextlib.contextmanager
def running_hub(*, database: str, workers: int, concurrency: int, connections: int = PRIVATE_MAX_CONNECTIONS):
    """Yield a Hub with Daphne serving and the workers started; everything is undone on exit."""
    log_dir = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    port = free_port()
    with contextlib.ExitStack() as cleanup:
        server = os.environ.get("BENCH_POSTGRES") or cleanup.enter_context(private_postgres(connections))
        dsn = cleanup.enter_context(benchmark_database(server.rstrip("/"), database))
        hub = Hub(env=hub_env(dsn=dsn, data_dir=log_dir / "data", port=port), port=port, dsn=dsn, log_dir=log_dir)
        cleanup.callback(flush_redis)
        cleanup.callback(close_django_connections)
        cleanup.callback(stop_all, hub)
        try:
            flush_redis()
            migrate(hub.env)
            log(f"database migrated; starting daphne on port {port} and {workers} worker(s)")
            start_daphne(hub)
            start_workers(hub, workers=workers, concurrency=concurrency)
            wait_until_served(hub)
            yield hub
        except BaseException:
            stop_all(hub)
            show_logs(hub)
            raise
        shutil.rmtree(log_dir, ignore_errors=True)


def close_django_connections() -> None:
    """The bench's own connections, so the database can be dropped without waiting."""
    with contextlib.suppress(Exception):
        from django.db import connections

        connections.close_all()
