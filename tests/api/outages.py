"""A hub whose database and Redis the test can take away: Daphne (no worker) on the test database
and Redis, each reached through a TCP proxy (tests/e2e/proxy.py). `down` refuses new connections
and closes the open ones, as a stopped service does; `hang` keeps them open but moves no bytes, as
a service that stopped answering does; `up` brings it back. The shared PostgreSQL and Redis
themselves are never touched, and this process reaches them directly.
"""

import contextlib
from dataclasses import dataclass
from urllib.parse import urlparse, urlunparse

from django.conf import settings

from tests.chaos.cluster import Cluster, test_database_url
from tests.e2e.proxy import TcpProxy


def _through(url: str, proxy: TcpProxy) -> str:
    """url with its host and port replaced by the proxy's."""
    parts = urlparse(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    return urlunparse(parts._replace(netloc=netloc))


def _proxy_for(url: str) -> TcpProxy:
    parts = urlparse(url)
    return TcpProxy(parts.port, host=parts.hostname or "127.0.0.1")


class Service:
    """One service as the hub under test reaches it."""

    def __init__(self, url: str):
        self.proxy = _proxy_for(url)
        self.url = _through(url, self.proxy)

    def down(self) -> None:
        self.proxy.freeze(False)
        self.proxy.block()
        self.proxy.cut()

    def hang(self) -> None:
        self.proxy.freeze()

    def up(self) -> None:
        self.proxy.freeze(False)
        self.proxy.block(False)


@dataclass
class OutageHub:
    cluster: Cluster
    base: str
    database: Service
    redis: Service

    def all_up(self) -> None:
        self.database.up()
        self.redis.up()


def _own_database(url: str) -> str:
    """The same Redis server, another database number: the hub's broker queue is its own, so a
    worker of another test hub (the e2e package's) never takes its tasks, which tests expect to
    wait for a worker."""
    parts = urlparse(url)
    number = int(parts.path.strip("/") or 0)
    return urlunparse(parts._replace(path=f"/{(number + 8) % 16}"))


@contextlib.contextmanager
def hub_with_outages(log_dir, **env):
    """Daphne on the test database and Redis through proxies; yields an OutageHub. Sessions made in
    this process log in there (the same SECRET_KEY)."""
    database = Service(test_database_url())
    redis = Service(_own_database(settings.REDIS_URL))
    cluster = Cluster(log_dir, SECRET_KEY=settings.SECRET_KEY, DATABASE_URL=database.url, REDIS_URL=redis.url, **env)
    try:
        base = cluster.start_daphne()
        yield OutageHub(cluster=cluster, base=base, database=database, redis=redis)
    finally:
        cluster.shutdown()
        database.proxy.close()
        redis.proxy.close()
