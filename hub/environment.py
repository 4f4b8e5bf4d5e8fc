"""Reading the environment into settings, and failing fast with one clear line.

Settings must never print a traceback for a configuration mistake: a person who typed a wrong
DATABASE_URL should read one sentence that says so.
"""

import os
import sys
from urllib.parse import parse_qsl, unquote, urlparse


class ConfigurationError(SystemExit):
    """Stops start-up with a single readable line on stderr."""

    def __init__(self, message: str):
        super().__init__(f"Hub cannot start: {message}")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if not raw:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ConfigurationError(f"{name}={raw!r} is not a boolean (use true or false).")


def env_int(name: str, default: int) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a whole number.") from None


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number.") from None


def env_list(name: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [item.strip() for item in env_str(name).split(",") if item.strip()]


def database_from_url(url: str) -> dict:
    import dj_database_url

    scheme = urlparse(url).scheme
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ConfigurationError(
            "DATABASE_URL must start with postgres:// (or sqlite:// for a file); "
            f"got {scheme or 'no scheme'}://."
        )
    try:
        config = dj_database_url.parse(url, conn_max_age=env_int("HUB_DB_CONN_MAX_AGE", 60), conn_health_checks=True)
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ConfigurationError(f"DATABASE_URL is not a valid database URL ({exc}).") from None
    if config["ENGINE"].endswith("postgresql"):
        config.setdefault("OPTIONS", {})["connect_timeout"] = 5
        # Behind a pooler in transaction mode (PgBouncer) consecutive transactions of one
        # connection may run on different server connections: a cursor held across them (what
        # Django's .iterator() declares) would be gone. Django binds parameters on the client and
        # prepares no statements, so nothing else needs the same server connection twice.
        config["DISABLE_SERVER_SIDE_CURSORS"] = env_bool("HUB_DB_TRANSACTION_POOLING", False)
    return config


def storage_from_url(url: str, local_root) -> dict:
    """Django's STORAGES entry for files in chats: the folder local_root when url is empty, else
    an S3-compatible bucket, written s3://KEY:SECRET@HOST[:PORT]/BUCKET[?region=…&secure=false]
    (secure=false speaks plain HTTP, for a store on the same network such as MinIO)."""
    if not url:
        return {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(local_root)}}
    parts = urlparse(url)
    bucket = parts.path.strip("/")
    if parts.scheme != "s3" or not parts.hostname or not bucket or "/" in bucket:
        raise ConfigurationError("HUB_STORAGE_URL must look like s3://KEY:SECRET@HOST[:PORT]/BUCKET.")
    query = dict(parse_qsl(parts.query))
    secure = query.get("secure", "true").lower() not in {"0", "false", "no"}
    host = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "access_key": unquote(parts.username or ""),
            "secret_key": unquote(parts.password or ""),
            "endpoint_url": f"{'https' if secure else 'http'}://{host}",
            "region_name": query.get("region", "us-east-1"),
            # Files are only ever read through the hub's own download view, never by a link.
            "querystring_auth": False,
            "default_acl": None,
            "file_overwrite": False,
        },
    }


def check_services_reachable() -> None:
    """Connect once to the database and Redis; exit with one line if either does not answer."""
    from django.conf import settings
    from django.db import connection

    try:
        connection.ensure_connection()
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigurationError(f"the database does not answer ({first_line}).") from None
    if settings.HUB_REDIS:
        _check_redis(settings.HUB_REDIS)


def _check_redis(config) -> None:
    """PING through the hub's own client; the error names the Redis without its password."""
    import redis.exceptions

    try:
        config.client(socket_connect_timeout=3, socket_timeout=5).ping()
    except redis.exceptions.AuthenticationError as exc:
        raise ConfigurationError(f"Redis at {config.where} refused REDIS_URL's user or password ({exc}).") from None
    except Exception as exc:
        raise ConfigurationError(f"Redis at REDIS_URL does not answer ({config.where}: {exc}).") from None


def running_under(*commands: str) -> bool:
    return len(sys.argv) > 1 and sys.argv[1] in commands
