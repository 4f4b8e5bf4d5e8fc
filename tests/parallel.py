"""How the suite splits for `make test`: a parallel part under pytest-xdist and a serial part.

The parallel part runs on several xdist workers at once (`pytest -n 4 --dist loadfile --part
parallel`); the serial part (`pytest --part serial`) runs afterwards in one process. A test is
serial when it lives under tests/chaos or is marked `serial` (it times something, kills processes
or owns a machine-wide resource, so other tests running beside it would disturb it or it them).
Every collected test is in exactly one part; `--part all` (the default) runs both together.

Each xdist worker gets its own state, so workers never meet: a Redis database of its own (the
base database of REDIS_URL plus the worker's index: gw0 the base, gw1 the next), a data directory
of its own (var/test-workers/gwN, with the SQLite test file in embedded mode), and pytest-django
already gives each worker its own test database (test_<name>_gwN on PostgreSQL, the SQLite file
with the suffix _gwN). The variables are set in the worker before Django reads its settings, and
the hubs, workers and commands the tests start inherit them.
"""

import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

PARTS = ("all", "parallel", "serial")
CHAOS = Path(__file__).resolve().parent / "chaos"
# Redis has 16 databases (0-15) unless its `databases` setting says otherwise; the CI server and a
# default install have 16.
REDIS_DATABASES = 16


def is_serial(item) -> bool:
    """Whether a collected test belongs to the serial part."""
    return item.path.is_relative_to(CHAOS) or item.get_closest_marker("serial") is not None


def in_part(item, part: str) -> bool:
    if part == "all":
        return True
    return is_serial(item) == (part == "serial")


def worker_index(worker_id: str) -> int:
    """gw0 -> 0, gw1 -> 1, ..."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    if not match:
        raise ValueError(f"not an xdist worker id: {worker_id!r}")
    return int(match.group(1))


def redis_base(url: str) -> int:
    """The database number in a redis:// URL's path (0 when it has none)."""
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def check_redis_databases(url: str, workers: int) -> None:
    """Fail before any worker starts when base + index would pass Redis's last database."""
    if not url or workers <= 0:
        return
    base = redis_base(url)
    last = base + workers - 1
    if last >= REDIS_DATABASES:
        raise ValueError(
            f"REDIS_URL's database {base} with {workers} xdist workers needs databases {base}-{last}, "
            f"but Redis has only 0-{REDIS_DATABASES - 1}: use a lower database in REDIS_URL or fewer "
            f"workers (-n)"
        )


def worker_environment(worker_id: str, environ: dict, data_dir: Path) -> dict[str, str]:
    """The variables that give one xdist worker its own Redis database and data directory."""
    index = worker_index(worker_id)
    env = {"HUB_DATA_DIR": str(data_dir / "test-workers" / worker_id)}
    url = environ.get("REDIS_URL", "")
    if url:
        check_redis_databases(url, index + 1)
        parts = urlsplit(url)
        env["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{redis_base(url) + index}"))
    return env
