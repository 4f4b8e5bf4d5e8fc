"""The hub's processes on the topology's hosts, as the Procfile runs them: Daphne, Celery workers
(threads pool) and beat, all on the one PostgreSQL and Redis."""

import uuid
from pathlib import Path

import httpx
from kombu.pidbox import Mailbox

from tests.chaos.cluster import BIN, Service, process_env, wait_for
from tests.topology.network import Host

START_SECONDS = 60
TURN_QUEUE = "celery"  # Celery's default, where the hub sends every task
STANDBY_QUEUE = "topology-standby"  # nothing is ever sent here


def hub_env(log_dir: Path, *, database_url: str, redis_url: str, allowed_hosts: str) -> dict:
    """What every process of every host reads; the one SECRET_KEY lets web 2 read web 1's sessions."""
    return process_env(log_dir, DATABASE_URL=database_url, REDIS_URL=redis_url, ALLOWED_HOSTS=allowed_hosts)


class Web:
    def __init__(self, host: Host, name: str, port: int, env: dict, log_dir: Path):
        self.name, self.port = name, port
        self.base = f"http://{host.address}:{port}"
        argv = [str(BIN / "daphne"), "-b", host.address, "-p", str(port), "hub.asgi:application"]
        self.service = host.spawn(name, argv, env, log_dir)

    def answers(self) -> bool:
        if not self.service.alive:
            raise AssertionError(f"{self.name} exited:\n{self.service.log_tail()}")
        try:
            return httpx.get(f"{self.base}/login/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_until_serving(self) -> None:
        wait_for(self.answers, timeout=START_SECONDS, what=f"{self.name} to serve the log-in page", every=0.1)


class Worker:
    """A worker; one `standing_by` consumes no queue the hub sends to until `take_turns` (so the
    test decides which host's worker takes a turn without waiting for a worker to start)."""

    def __init__(self, host: Host, name: str, env: dict, log_dir: Path, *, standing_by: bool = False):
        self.name, self.host = name, host
        self.broker_url = env["REDIS_URL"]
        self.node = f"{name}-{uuid.uuid4().hex[:6]}@{host.hostname or 'loopback'}"
        queue = STANDBY_QUEUE if standing_by else TURN_QUEUE
        argv = [str(BIN / "celery"), "-A", "hub", "worker", "--pool", "threads", "--concurrency", "4",
                "--queues", queue, "-n", self.node, "--loglevel", "WARNING"]
        self.service = host.spawn(name, argv, env, log_dir)

    @property
    def pid(self) -> int:
        return self.service.pid

    def _control(self, command: str, arguments: dict, *, timeout: float) -> list:
        from hub.celery import app

        # A mailbox of its own on the hosts' broker (app.control would use this process's settings).
        with app.connection_for_write(self.broker_url) as connection:
            mailbox = Mailbox(app.conf.control_exchange, type="fanout", accept=["json"])(connection)
            return mailbox._broadcast(command, arguments, [self.node], reply=True, timeout=timeout)

    def answers_a_ping(self) -> bool:
        if not self.service.alive:
            raise AssertionError(f"{self.name} exited:\n{self.service.log_tail()}")
        return bool(self._control("ping", {}, timeout=0.5))

    def wait_until_ready(self) -> None:
        wait_for(self.answers_a_ping, timeout=START_SECONDS, what=f"{self.name} to answer a ping", every=0.1)

    def take_turns(self) -> None:
        """Start consuming the queue the hub sends turns to."""
        answer = self._control("add_consumer", {"queue": TURN_QUEUE}, timeout=5)
        assert answer and "ok" in next(iter(answer[0].values())), f"{self.name} did not join the queue: {answer}"


def start_beat(host: Host, env: dict, log_dir: Path) -> Service:
    argv = [str(BIN / "celery"), "-A", "hub", "beat", "--scheduler", "celery.beat:Scheduler",
            "--schedule", str(log_dir / "beat-schedule"), "--loglevel", "WARNING"]
    return host.spawn("beat", argv, env, log_dir)
