"""Where a round's CPU went: the cores each role used, read from /proc (Linux; None elsewhere).

The streaming benchmark's latencies on a small machine depend on how busy its cores are, so each
round reports the cores used by Daphne, the workers, PostgreSQL, Redis and the benchmark's own
client, and how busy the whole machine was.
"""

import os
import time
from pathlib import Path

PROC = Path("/proc")
ROLES = {"daphne": "daphne", "celery": "workers", "postgres": "postgres", "redis-server": "redis"}


def _process_ticks() -> dict[str, int]:
    """CPU ticks so far, summed by role.

    A process's own ticks and those of its children that ended (PostgreSQL's postmaster collects
    a backend's when its connection closes, and workers close theirs after each turn): summed
    over both snapshots, a process that ended between them counts exactly once.
    """
    ticks: dict[str, int] = {}
    own = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        role = "client" if int(entry.name) == own else ROLES.get(comm, "other")
        ticks[role] = ticks.get(role, 0) + _ticks_in(stat)
    return ticks


def _ticks_in(stat: str) -> int:
    """utime, stime, cutime and cstime of a /proc/<pid>/stat line (after the command's name)."""
    return sum(int(value) for value in stat[stat.rindex(")") + 2:].split()[11:15])


def machine_ticks() -> tuple[int, int]:
    """(busy, total) ticks of all cores together, from the first line of /proc/stat."""
    values = [int(v) for v in (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return sum(values) - idle, sum(values)


def snapshot():
    if not (PROC / "stat").exists():
        return None
    return time.monotonic(), _process_ticks(), machine_ticks()


def cores_used(start, end) -> dict | None:
    """Cores used per role between two snapshots, and the machine's busy fraction."""
    if start is None or end is None:
        return None
    seconds = end[0] - start[0]
    hz = os.sysconf("SC_CLK_TCK")
    roles = {role: round((end[1].get(role, 0) - start[1].get(role, 0)) / hz / seconds, 2)
             for role in ("daphne", "workers", "postgres", "redis", "client", "other")}
    busy, total = end[2][0] - start[2][0], end[2][1] - start[2][1]
    return {"cores": roles, "machine_busy": round(busy / total, 2) if total else None}


def python_speed_ms(repeats: int = 5) -> float:
    """Median milliseconds one core takes for a fixed pure-Python loop (a million additions).

    The machine is shared and its cores run faster on some days than on others: this puts each
    run's figures beside the speed of the cores it ran on, so runs of different days compare.
    """
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for number in range(1_000_000):
            total += number
        timings.append(time.perf_counter() - started)
    return round(sorted(timings)[repeats // 2] * 1000, 1)


def process_ticks(pid: int) -> int | None:
    """One process's CPU ticks so far, with those of its children that ended; None once it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return _ticks_in(stat)


def tree_ticks(pid: int) -> int | None:
    """A process's ticks and its living children's, as process_ticks counts each: a parent that
    reaps its children (PostgreSQL's postmaster, its backends) holds the ended ones' ticks."""
    own = process_ticks(pid)
    if own is None:
        return None
    try:
        children = (PROC / str(pid) / "task" / str(pid) / "children").read_text().split()
    except OSError:
        children = []
    return own + sum(process_ticks(int(child)) or 0 for child in children)
