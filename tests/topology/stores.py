"""The one PostgreSQL and the one Redis every host uses: private servers (tests/chaos), listening
on the network's address as well as on 127.0.0.1.

The machine's shared servers listen on 127.0.0.1 only, which no other namespace can reach, and
other tests use them; these are the test's own and are removed after it.
"""

import subprocess
from pathlib import Path

from tests.chaos.postgres_server import PG_CTL_TIMEOUT, PostgresServer
from tests.chaos.redis_server import REDIS_SERVER, RedisServer


class NetworkPostgres(PostgresServer):
    def __init__(self, address: str, subnet: str):
        super().__init__()
        self.address = address
        # initdb trusts loopback only; the hosts connect from the network's other addresses.
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {subnet} trust\n")

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@{self.address}:{self.port}/{database}"

    def start(self) -> None:
        listen = ",".join(dict.fromkeys([self.address, "127.0.0.1"]))
        options = (f"-p {self.port} -c listen_addresses={listen} -c unix_socket_directories={self.home} "
                   "-c fsync=off")
        self._run("pg_ctl", "-D", self.data, "-w", "-t", PG_CTL_TIMEOUT, "-l", self.home / "postgres.log",
                  "-o", options, "start")


class NetworkRedis(RedisServer):
    def __init__(self, log_dir: Path, address: str):
        super().__init__(log_dir)
        self.address = address

    def url(self, db: int = 0) -> str:
        return f"redis://{self.address}:{self.port}/{db}"

    def start(self, *, timeout: float = 10) -> "NetworkRedis":
        assert not self.alive, "this redis-server is already running"
        binds = list(dict.fromkeys([self.address, "127.0.0.1"]))
        # Not protected mode: it would refuse every host but this one; the bridge is private to the test.
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", *binds, "--protected-mode", "no", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", str(self.log_path.parent)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        self._wait_until_answering(timeout)
        return self
