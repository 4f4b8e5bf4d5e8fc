"""`make test` runs the suite in three parts (tests/parallel.py); together they run every test once."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import parallel

ROOT = Path(__file__).resolve().parents[1]


# pytest's own collection for each part, in one process: the test modules are imported once.
COLLECT = """
import pytest
for part in ("all", "parallel", "serial", "alone"):
    print("--part", part, flush=True)
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "--part", part])
    print("--exit", int(code), flush=True)
"""


def collected() -> dict[str, list[str]]:
    """The node ids `pytest --part PART` would run, for each part."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    result = subprocess.run([sys.executable, "-c", COLLECT], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    parts: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("--part "):
            part = parts.setdefault(line.split()[1], [])
        elif line.startswith("--exit "):
            assert line == "--exit 0", result.stdout[-3000:] + result.stderr[-3000:]
        elif "::" in line:
            part.append(line)
    return parts


def test_the_three_parts_run_every_test_exactly_once():
    parts = collected()
    everything, in_parallel, in_serial, alone = parts["all"], parts["parallel"], parts["serial"], parts["alone"]

    assert len(everything) > 500  # the whole suite, not an empty or broken collection
    assert sorted(in_parallel + in_serial + alone) == sorted(everything)  # each test in one part
    chaos = [node for node in everything if node.startswith("tests/chaos/")]
    assert chaos and set(chaos) <= set(in_serial)
    watchdog = [node for node in everything if node.startswith("tests/agents_app/test_recovery_hooks.py")]
    assert watchdog and set(watchdog) <= set(alone)


@pytest.mark.parametrize(
    ("worker", "redis", "expected"),
    [
        ("gw0", "redis://127.0.0.1:6379/4", "redis://127.0.0.1:6379/4"),
        ("gw3", "redis://127.0.0.1:6379/4", "redis://127.0.0.1:6379/7"),
        ("gw2", "redis://:secret@cache:6380", "redis://:secret@cache:6380/2"),
        ("gw1", "", None),
    ],
)
def test_each_worker_has_its_own_redis_database_and_data_directory(worker, redis, expected, tmp_path):
    env = parallel.worker_environment(worker, {"REDIS_URL": redis} if redis else {}, tmp_path)

    assert env["HUB_DATA_DIR"] == str(tmp_path / "test-workers" / worker)
    assert env.get("REDIS_URL") == expected


def test_workers_past_redis_last_database_are_refused(tmp_path):
    parallel.check_redis_databases("redis://127.0.0.1:6379/12", 4)  # 12-15: the last four
    with pytest.raises(ValueError, match="needs databases 13-16"):
        parallel.check_redis_databases("redis://127.0.0.1:6379/13", 4)
    with pytest.raises(ValueError, match="only 0-15"):
        parallel.worker_environment("gw4", {"REDIS_URL": "redis://127.0.0.1:6379/12"}, tmp_path)
