"""Fixtures of the chaos tests: real workers on the test database, a seeded RNG, and the counts.

At the end of the run the terminal reporter prints one JSON line per chaos test and one with the
totals, {"chaos": {"kills": N, "recovered_runs": M, ...}}, so they show in CI logs with or
without -s (output capture swallows even sys.__stdout__); tests/chaos/counts.py gathers them.
"""

import os
import random
import sys
import time
from collections import Counter

import pytest

# Plain asserts in the helpers report their values, as in the tests themselves.
pytest.register_assert_rewrite("tests.chaos.scenarios")

from tests.chaos.cluster import Cluster  # noqa: E402
from tests.chaos.counts import CHAOS_PROPERTY  # noqa: E402


def total_kills() -> int:
    """CHAOS_KILLS: SIGKILLs the path tests deal out together (`make chaos` raises it)."""
    return int(os.environ.get("CHAOS_KILLS", "20"))


@pytest.fixture
def chaos_seed() -> int:
    """Random kill moments are reproducible: CHAOS_SEED=<the seed in the JSON line> repeats them."""
    return int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1_000_000))


@pytest.fixture
def rng(chaos_seed):
    return random.Random(chaos_seed)


@pytest.fixture
def chaos_counts(request, chaos_seed):
    """This test's counts, added to the run's totals (and listed) when it ends."""
    counts: Counter = Counter()
    started = time.monotonic()
    yield counts
    line = {"test": request.node.name, "seed": chaos_seed, "seconds": round(time.monotonic() - started), **counts}
    request.node.user_properties.append((CHAOS_PROPERTY, line))


@pytest.fixture
def make_cluster(transactional_db, tmp_path, request):
    """make_cluster(**env) -> a Cluster; every process it started is killed when the test ends.

    Torn down before the database is flushed, so no worker holds a connection to it by then.
    """
    clusters = []

    def make(**env_overrides) -> Cluster:
        cluster = Cluster(tmp_path, **env_overrides)
        clusters.append(cluster)
        return cluster

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for cluster in clusters:
        cluster.shutdown()
        if failed:
            sys.__stderr__.write(f"\nprocess logs of {request.node.name}:\n{cluster.logs()}\n")


@pytest.fixture(autouse=True)
def _users_log_in_to_other_processes(real_password_hashers):
    """The chaos tests' users log in to hubs running in other processes, which check passwords
    with the hub's real hashers."""
