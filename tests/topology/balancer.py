"""HAProxy in front of the two web processes of host A, from Debian's package.

`balance first` sends every connection to the first server that is up (none has a maxconn, so
web 1 takes them all while it lives); health checks every 100 ms take a dead web 1 out at the
first failure, and a connection refused on the way is dispatched again to the other server, so a
tab that reconnects after web 1 died lands on web 2. The stats socket says which server holds
how many connections.
"""

import csv
import os
import socket
from pathlib import Path

from tests.chaos.cluster import wait_for
from tests.topology.network import Host

HAPROXY = "/usr/sbin/haproxy"

CONFIG = """\
global
    maxconn 1000
    stats socket {socket} mode 600 level admin

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A websocket is a tunnel once upgraded; a streaming tab may be quiet for a while.
    timeout tunnel 120s
    retries 3
    option redispatch 1

frontend hub
    bind {address}:{port}
    default_backend webs

backend webs
    balance first
    default-server check inter 100ms fastinter 100ms downinter 100ms fall 1 rise 1
{servers}
"""


class Balancer:
    def __init__(self, host: Host, webs: dict[str, int], log_dir: Path):
        self.host = host
        self.port = host.port(8000)
        self.socket_path = log_dir / "haproxy.sock"
        servers = "\n".join(f"    server {name} {host.address}:{port}" for name, port in webs.items())
        config = log_dir / "haproxy.cfg"
        config.write_text(CONFIG.format(socket=self.socket_path, address=host.address, port=self.port,
                                        servers=servers))
        self.service = host.spawn("haproxy", [HAPROXY, "-f", str(config), "-db"],
                                  {"PATH": os.environ["PATH"]}, log_dir)

    @property
    def base(self) -> str:
        return f"http://{self.host.address}:{self.port}"

    def servers(self) -> dict[str, dict]:
        """The backend's servers from `show stat`: status, current and total connections."""
        with socket.socket(socket.AF_UNIX) as stats:
            stats.settimeout(2)
            stats.connect(str(self.socket_path))
            stats.sendall(b"show stat\n")
            raw = b""
            while chunk := stats.recv(65536):
                raw += chunk
        rows = csv.DictReader(raw.decode().lstrip("# ").splitlines())
        return {row["svname"]: {"status": row["status"], "current": int(row["scur"] or 0),
                                "total": int(row["stot"] or 0)}
                for row in rows if row["pxname"] == "webs" and row["svname"] not in ("BACKEND", "FRONTEND")}

    def wait_until_up(self, *names: str) -> None:
        def all_up():
            if not self.service.alive:
                raise AssertionError(f"haproxy exited:\n{self.service.log_tail()}")
            try:
                servers = self.servers()
            except OSError:
                return False
            return all(servers.get(name, {}).get("status") == "UP" for name in names)

        wait_for(all_up, timeout=30, what=f"haproxy to see {', '.join(names)} up", every=0.1)
