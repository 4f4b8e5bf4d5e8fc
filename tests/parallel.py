"""How the suite splits for `make test`: a parallel part, a serial part and the tests run alone.

1. The parallel part runs on several xdist workers at once (`pytest -n 2 --dist loadfile --part
   parallel`): almost every test, the machine's cores kept busy.
2. The serial part runs afterwards, two tests at a time (`pytest -n 2 --dist loadfile --part
   serial`): the chaos tests and those marked `serial`. They kill processes, restart servers of
   their own or wait seconds for processes they started, so a saturated machine would disturb
   them; most of their time is waiting, so one neighbour costs them little.
3. The tests marked `alone` run last, in one process (`pytest --part alone`): a sub-second
   watchdog, or network devices, that nothing may run beside.

Every collected test is in exactly one part; `--part all` (the default) runs them together.

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

PARTS = ("all", "parallel", "serial", "alone")
CHAOS = Path(__file__).resolve().parent / "chaos"
# Redis has 16 databases (0-15) unless its `databases` setting says otherwise; the CI server and a
# default install have 16.
REDIS_DATABASES = 16


def part_of(item) -> str:
    """The part of the suite a collected test belongs to."""
    if item.get_closest_marker("alone") is not None:
        return "alone"
    if item.path.is_relative_to(CHAOS) or item.get_closest_marker("serial") is not None:
        return "serial"
    return "parallel"


def in_part(item, part: str) -> bool:
    return part == "all" or part_of(item) == part


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
