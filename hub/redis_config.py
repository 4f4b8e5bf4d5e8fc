"""The one place that turns the Redis settings into each client's configuration.

Every Redis client of the hub (the channel layer, the Celery broker, the cache behind the
throttles, the replay buffer and delta feed, the temporary chats' store, the peers' marks and the
health probes) is built from here, so a password, TLS or Sentinel set once applies to all of them
and nothing else builds a URL of its own.

The settings:
- REDIS_URL: redis://[[user]:password@]host:port/db, or rediss:// for TLS (or unix:///path?db=N).
  It carries no query string: TLS files have their own settings, so there is one way to say each thing.
- HUB_REDIS_CA_FILE: the CA bundle that signs the server's certificate (default: the system's).
  HUB_REDIS_CERT_FILE and HUB_REDIS_KEY_FILE: a client certificate, for a server that asks for one.
- HUB_REDIS_SENTINELS (host:port,host:port) with HUB_REDIS_SENTINEL_MASTER: the master's address
  comes from the Sentinels and REDIS_URL's host and port are not used (its user, password, database
  and scheme are). HUB_REDIS_SENTINEL_PASSWORD: the Sentinels' own password, if they have one.
  With rediss:// the Sentinels are reached over TLS too, with the same files.
"""

import ssl
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import quote, urlparse

from hub.environment import ConfigurationError, env_str
from hub.redaction import redact


@dataclass(frozen=True)
class RedisConfig:
    url: str
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str = ""
    sentinel_password: str = ""

    def __repr__(self) -> str:  # a settings dump or a traceback's locals never show the passwords
        return f"RedisConfig({self.redacted_url!r}, sentinels={self.sentinels!r}, master={self.sentinel_master!r})"

    @property
    def redacted_url(self) -> str:
        return redact(self.url)

    @property
    def tls(self) -> bool:
        return urlparse(self.url).scheme == "rediss"

    @cached_property
    def _url_parts(self) -> dict:
        from redis.connection import parse_url

        return parse_url(self.url)

    @property
    def db(self) -> int:
        return int(self._url_parts.get("db", 0))

    @property
    def where(self) -> str:
        """How an error names this Redis, without its password."""
        if self.sentinels:
            listed = ",".join(f"{host}:{port}" for host, port in self.sentinels)
            return f"Sentinel master {self.sentinel_master!r} (Sentinels {listed})"
        return self.redacted_url

    def tls_options(self) -> dict:
        """redis-py's TLS keyword arguments: the server's certificate is always verified."""
        if not self.tls:
            return {}
        options = {"ssl_cert_reqs": "required"}
        if self.ca_file:
            options["ssl_ca_certs"] = self.ca_file
        if self.cert_file:
            options |= {"ssl_certfile": self.cert_file, "ssl_keyfile": self.key_file}
        return options

    def _master_options(self) -> dict:
        """What a connection to the master needs besides its address."""
        parts = self._url_parts
        options = {"db": self.db, **self.tls_options()}
        if self.tls:
            options["ssl"] = True  # SentinelConnectionPool picks its TLS connection class by this
        if parts.get("username"):
            options["username"] = parts["username"]
        if parts.get("password"):
            options["password"] = parts["password"]
        return options

    def sentinel_options(self) -> dict:
        """The keyword arguments of the connections to the Sentinels themselves."""
        options = {"socket_connect_timeout": 3, "socket_timeout": 3}
        if self.sentinel_password:
            options["password"] = self.sentinel_password
        if self.tls:
            options |= {"ssl": True, **self.tls_options()}
        return options

    # --- redis-py ---------------------------------------------------------------------------

    def pool(self, **options):
        """A connection pool of the synchronous redis-py client."""
        import redis
        from redis.sentinel import Sentinel, SentinelConnectionPool

        if self.sentinels:
            sentinel = Sentinel(list(self.sentinels), sentinel_kwargs=self.sentinel_options())
            return SentinelConnectionPool(self.sentinel_master, sentinel, **self._master_options(), **options)
        return redis.ConnectionPool.from_url(self.url, **self.tls_options(), **options)

    def client(self, **options):
        """A synchronous redis-py client; options are connection options (timeouts, retry...)."""
        import redis

        return redis.Redis.from_pool(self.pool(**options))

    def async_client(self, **options):
        import redis.asyncio
        from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

        if self.sentinels:
            sentinel = Sentinel(list(self.sentinels), sentinel_kwargs=self.sentinel_options())
            pool = SentinelConnectionPool(self.sentinel_master, sentinel, **self._master_options(), **options)
        else:
            pool = redis.asyncio.ConnectionPool.from_url(self.url, **self.tls_options(), **options)
        return redis.asyncio.Redis.from_pool(pool)

    # --- the other libraries ----------------------------------------------------------------

    def channel_layer_host(self, **options) -> dict:
        """One entry of channels-redis' "hosts": a URL, or the Sentinels and the master's name."""
        if self.sentinels:
            return {"master_name": self.sentinel_master, "sentinels": list(self.sentinels),
                    "sentinel_kwargs": self.sentinel_options(), **self._master_options(), **options}
        return {"address": self.url, **self.tls_options(), **options}

    def broker_url(self) -> str:
        """kombu's URL: the same as REDIS_URL, or one sentinel:// URL per Sentinel."""
        if not self.sentinels:
            return self.url
        parts = self._url_parts
        credentials = ""
        if parts.get("password"):
            credentials = f"{quote(parts.get('username') or '', safe='')}:{quote(parts['password'], safe='')}@"
        return ";".join(f"sentinel://{credentials}{host}:{port}/{self.db}" for host, port in self.sentinels)

    def broker_transport_options(self) -> dict:
        if not self.sentinels:
            return {}
        return {"master_name": self.sentinel_master, "sentinel_kwargs": self.sentinel_options()}

    def broker_use_ssl(self) -> dict | None:
        """kombu's TLS settings (the same redis-py arguments, with ssl's constant for the check)."""
        if not self.tls:
            return None
        return self.tls_options() | {"ssl_cert_reqs": ssl.CERT_REQUIRED}


def from_environment() -> RedisConfig | None:
    """The settings checked, or None when REDIS_URL is empty (embedded mode)."""
    url = env_str("REDIS_URL")
    if not url:
        return None
    parts = urlparse(url)
    if parts.scheme not in {"redis", "rediss", "unix"}:
        raise ConfigurationError(f"REDIS_URL must start with redis:// or rediss://; got {redact(url)!r}.")
    if parts.query and parts.scheme != "unix":
        raise ConfigurationError("REDIS_URL takes no query string: TLS files go in HUB_REDIS_CA_FILE, "
                                 "HUB_REDIS_CERT_FILE and HUB_REDIS_KEY_FILE.")
    config = RedisConfig(
        url=url,
        ca_file=_readable_file("HUB_REDIS_CA_FILE"),
        cert_file=_readable_file("HUB_REDIS_CERT_FILE"),
        key_file=_readable_file("HUB_REDIS_KEY_FILE"),
        sentinels=_sentinels(env_str("HUB_REDIS_SENTINELS")),
        sentinel_master=env_str("HUB_REDIS_SENTINEL_MASTER"),
        sentinel_password=env_str("HUB_REDIS_SENTINEL_PASSWORD"),
    )
    if (config.ca_file or config.cert_file) and not config.tls:
        raise ConfigurationError("HUB_REDIS_CA_FILE and HUB_REDIS_CERT_FILE need a rediss:// REDIS_URL.")
    if bool(config.cert_file) != bool(config.key_file):
        raise ConfigurationError("HUB_REDIS_CERT_FILE and HUB_REDIS_KEY_FILE go together: set both or neither.")
    if bool(config.sentinels) != bool(config.sentinel_master):
        raise ConfigurationError("HUB_REDIS_SENTINELS and HUB_REDIS_SENTINEL_MASTER go together: set both or neither.")
    return config


def _readable_file(name: str) -> str:
    path = env_str(name)
    if path:
        try:
            open(path, "rb").close()  # noqa: SIM115  (only whether it opens)
        except OSError as exc:
            raise ConfigurationError(f"{name}={path!r} cannot be read ({exc.strerror}).") from None
    return path


def _sentinels(listed: str) -> tuple[tuple[str, int], ...]:
    found = []
    for item in (part.strip() for part in listed.split(",")):
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigurationError(f"HUB_REDIS_SENTINELS must list host:port pairs; got {item!r}.")
        found.append((host, int(port)))
    return tuple(found)


class CachePool:
    """Django's Redis cache makes its pool with pool_class.from_url(LOCATION, **OPTIONS): this
    class makes it from the hub's settings instead, so the cache follows Sentinel and TLS too."""

    @classmethod
    def from_url(cls, url: str, **options):
        from django.conf import settings

        return settings.HUB_REDIS.pool(**options)


def current() -> RedisConfig:
    from django.conf import settings

    return settings.HUB_REDIS
