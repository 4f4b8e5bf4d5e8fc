"""A PostgreSQL server of a test's own, to stop and start at will.

The shared server (127.0.0.1:5432) serves everyone's tests and must never be stopped, so a test
that restarts PostgreSQL makes its own cluster: initdb into a temporary directory, pg_ctl on a
free port of 127.0.0.1, removed at the end. PostgreSQL refuses to run as root; as root, its
commands run as the postgres user (so the cluster lives in a directory of its own under the
temporary directory, which that user can reach, not in pytest's tmp_path).

    with PostgresServer() as server:
        url = server.create_database("hub")      # postgres://postgres@127.0.0.1:<port>/hub
        server.stop("immediate")                 # a crash, as its clients see it
        server.start()                           # recovers from its WAL, on the same port
"""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PG_CTL_TIMEOUT = 60


def bindir() -> Path:
    """Where initdb and pg_ctl are: on the PATH, or the newest /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if not installed:
        raise RuntimeError("no initdb found: install PostgreSQL's server binaries")
    return installed[-1].parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self):
        self.home = Path(tempfile.mkdtemp(prefix="hub-test-postgres-"))
        self.data = self.home / "data"
        self.port = free_port()
        self.bin = bindir()
        if os.geteuid() == 0:
            shutil.chown(self.home, "postgres", "postgres")
        self._run("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8",
                  "--no-locale")

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start (again) and wait until it accepts connections."""
        # fsync off: the data only has to outlive the server's processes, not the machine.
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.home} "
                   "-c fsync=off")
        self._run("pg_ctl", "-D", self.data, "-w", "-t", PG_CTL_TIMEOUT, "-l", self.home / "postgres.log",
                  "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop: "immediate" ends every process at once, without a shutdown checkpoint or a
        word to any client (a crash, for them); "fast" disconnects the clients cleanly."""
        self._run("pg_ctl", "-D", self.data, "-w", "-t", PG_CTL_TIMEOUT, "-m", mode, "stop")

    def create_database(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.home / "postgres.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def remove(self) -> None:
        """Stop the server this directory's pid file names (ours, nothing else) and delete it all."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run(self._as_postgres("pg_ctl", "-D", self.data, "-m", "immediate", "stop"),
                           capture_output=True, timeout=PG_CTL_TIMEOUT)
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        try:
            self.start()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def _run(self, program: str, *args) -> None:
        result = subprocess.run(self._as_postgres(program, *args), capture_output=True, text=True,
                                timeout=PG_CTL_TIMEOUT + 30)
        if result.returncode != 0:
            raise RuntimeError(f"{program} failed ({result.returncode}):\n{result.stdout}{result.stderr}\n"
                               f"{self.log_tail()}")

    def _as_postgres(self, program: str, *args) -> list[str]:
        argv = [str(self.bin / program), *map(str, args)]
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv
