"""A private redis-server for the tests that kill Redis: never the shared one other tests use.

No persistence, as most hubs run their Redis cache: a restart loses every key (the broker's
queue and unacked set, group memberships, replay buffers), which is the harder case to survive.
"""

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """redis-server on a free port of 127.0.0.1, started, SIGKILLed and started again on that port."""

    def __init__(self, log_dir: Path, *, port: int | None = None):
        self.port = port or free_port()
        self.log_path = Path(log_dir) / f"redis-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, *, timeout: float = 10) -> "RedisServer":
        assert not self.alive, "this redis-server is already running"
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", str(self.log_path.parent)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        self._wait_until_answering(timeout)
        return self

    def _wait_until_answering(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive:
                raise AssertionError(f"redis-server on port {self.port} exited:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise AssertionError(f"redis-server on port {self.port} did not answer within {timeout:.0f} s")
            time.sleep(0.05)

    def sigkill(self) -> None:
        """Kill it the hard way (no save, no goodbye to clients) and reap it: the port is free at once."""
        if self.alive:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(10)

    def restart_after(self, seconds: float) -> None:
        """SIGKILL, stay down for `seconds`, start again on the same port (empty)."""
        self.sigkill()
        time.sleep(seconds)
        self.start()

    def stop(self) -> None:
        self.sigkill()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
