"""Real processes for the chaos tests: Celery workers, beat and Daphne on the test database.

Every process runs in its own session, so stopping one kills its whole process group (a prefork
worker's pool children included) and nothing outlives a test.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from kombu.pidbox import Mailbox

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Short timings, so a lost turn is found in about a second and a stuck one within seconds.
TIMINGS = {
    "HUB_LEASE_SECONDS": "3",
    "HUB_SWEEP_SECONDS": "1",
    "HUB_STALL_SECONDS": "20",
    "HUB_MAX_RECOVERIES": "3",
}


def test_database_url() -> str:
    """DATABASE_URL of the database pytest-django made (test_<name>), for the spawned processes."""
    db = settings.DATABASES["default"]
    credentials = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{credentials}@{host}:{port}/{db['NAME']}"


def process_env(log_dir: Path, **overrides) -> dict:
    env = dict(os.environ)
    env.update(TIMINGS)
    env.update(
        DATABASE_URL=test_database_url(),
        REDIS_URL=settings.REDIS_URL,
        HUB_TEST_TOOLS="1",  # registers the `die` tool for the poison-turn test
        HUB_DATA_DIR=str(log_dir / "var"),
        SECRET_KEY="chaos-tests-only-" + "x" * 40,
        PYTHONUNBUFFERED="1",
    )
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def wait_for(predicate, *, timeout: float, what: str, every: float = 0.05):
    """Poll predicate until it returns something truthy; fail the test with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def parent_pid(pid: int) -> int | None:
    """The parent of a live process, from /proc (no psutil)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def owner_pid(run) -> int | None:
    """The pid in a run's lease owner ("host:pid:thread"): the process executing it."""
    parts = (run.lease_owner or "").split(":")
    return int(parts[1]) if len(parts) == 3 and parts[0] == socket.gethostname() else None


class Service:
    """One spawned process with its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in stop())
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pid = self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def sigkill(self) -> None:
        """SIGKILL the main process only and reap it, so its pid is gone (not a zombie) at once."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """Kill the whole process group: the main process and anything it left behind."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self._log.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Worker(Service):
    def __init__(self, index: int, *, pool: str, concurrency: int, env: dict, log_dir: Path):
        self.pool, self.concurrency = pool, concurrency
        self.broker_url = env["REDIS_URL"]
        self.hostname = f"chaos{index}-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        argv = [
            str(BIN / "celery"), "-A", "hub", "worker", "--pool", pool, "--concurrency", str(concurrency),
            "-n", self.hostname, "--loglevel", "WARNING",
        ]
        super().__init__(f"worker-{index}", argv, env, log_dir)

    def is_ready(self) -> bool:
        from hub.celery import app

        if not self.alive:
            raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
        # On the broker the worker uses, which may be another Redis database than this process's:
        # a mailbox of its own, since app.control publishes through the app's default producers.
        with app.connection_for_write(self.broker_url) as connection:
            mailbox = Mailbox(app.conf.control_exchange, type="fanout", accept=["json"])(connection)
            return bool(mailbox._broadcast("ping", {}, [self.hostname], reply=True, timeout=0.5))

    def runs_pid(self, pid: int) -> bool:
        """Whether pid is this worker's process or one of its pool children."""
        return pid == self.pid or parent_pid(pid) == self.pid


class Cluster:
    """The workers (and beat, Daphne) of one test."""

    def __init__(self, log_dir: Path, **env_overrides):
        self.log_dir = log_dir
        self.env = process_env(log_dir, **env_overrides)
        self.workers: list[Worker] = []
        self.services: list[Service] = []
        self.killed_pids: set[int] = set()

    # Starting -------------------------------------------------------------------------------
    def start_workers(self, count: int = 1, *, pool: str = "threads", concurrency: int = 4) -> list[Worker]:
        started = [self._spawn_worker(pool, concurrency) for _ in range(count)]
        for worker in started:
            wait_for(worker.is_ready, timeout=60, what=f"{worker.name} to answer a ping", every=0.2)
        return started

    def _spawn_worker(self, pool: str, concurrency: int) -> Worker:
        worker = Worker(len(self.services), pool=pool, concurrency=concurrency, env=self.env, log_dir=self.log_dir)
        self.workers.append(worker)
        self.services.append(worker)
        return worker

    def start_beat(self) -> Service:
        argv = [str(BIN / "celery"), "-A", "hub", "beat", "--scheduler", "celery.beat:Scheduler",
                "--loglevel", "WARNING"]
        beat = Service("beat", argv, self.env, self.log_dir)
        self.services.append(beat)
        return beat

    def start_daphne(self) -> str:
        """Serve hub.asgi on a free port; returns its base URL once it answers."""
        import httpx

        port = free_port()
        daphne = Service("daphne", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                                    "hub.asgi:application"], self.env, self.log_dir)
        self.services.append(daphne)
        self.daphne = daphne
        base = f"http://127.0.0.1:{port}"

        def answers():
            if not daphne.alive:
                raise AssertionError(f"daphne exited:\n{daphne.log_tail()}")
            try:
                return httpx.get(f"{base}/login/", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(answers, timeout=60, what="daphne to serve the log-in page", every=0.2)
        return base

    # Killing --------------------------------------------------------------------------------
    def live_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    def worker_running(self, run) -> Worker | None:
        pid = owner_pid(run)
        if pid is None:
            return None
        return next((w for w in self.live_workers() if w.runs_pid(pid)), None)

    def kill_and_replace(self, worker: Worker) -> Worker:
        """SIGKILL a worker and start another like it at once (not waiting for it to be ready)."""
        worker.sigkill()
        self.killed_pids.add(worker.pid)
        self.workers.remove(worker)
        return self._spawn_worker(worker.pool, worker.concurrency)

    def replace_dead_workers(self) -> int:
        """Start a new worker for each one that died on its own (as a supervisor would)."""
        dead = [w for w in self.workers if not w.alive]
        for worker in dead:
            self.killed_pids.add(worker.pid)
            self.workers.remove(worker)
            self._spawn_worker(worker.pool, worker.concurrency)
        return len(dead)

    def manage(self, *args: str, timeout: float = 180) -> str:
        """Run `manage.py <args>` with the cluster's environment; returns its output."""
        result = subprocess.run([str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=self.env,
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"manage.py {args[0]} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    def wait_all_ready(self) -> None:
        for worker in self.live_workers():
            wait_for(worker.is_ready, timeout=60, what=f"{worker.name} to answer a ping", every=0.2)

    def shutdown(self) -> None:
        for service in self.services:
            service.stop()

    def logs(self) -> str:
        return "\n\n".join(f"--- {s.name} (pid {s.pid}) ---\n{s.log_tail()}" for s in self.services)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
