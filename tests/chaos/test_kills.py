"""SIGKILL real Celery workers mid-reply, on every path that starts a turn, and check what is left.

Two workers (threads pool, as in the Procfile) and a real beat run on the test database. At a
random moment of each streamed reply the worker running it is SIGKILLed and a new one started;
after recovery each question must have exactly one final reply with the uninterrupted text, every
tool side effect must have happened exactly once, and no run may be left running, queued or
holding a checkpoint.
"""

import math
import os
import signal
import time

import pytest

from agents_app.models import Run
from agents_app.turns import runs
from tests.chaos import scenarios
from tests.chaos.cluster import owner_pid
from tests.chaos.conftest import total_kills

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

KILLS_PER_PATH = max(1, math.ceil(total_kills() / len(scenarios.PATHS)))


def record_recoveries(counts) -> None:
    counts["recovered_runs"] += Run.objects.filter(status=Run.Status.RECOVERED).count()
    counts["runs"] += Run.objects.count()


@pytest.mark.timeout(120 + 20 * KILLS_PER_PATH)
@pytest.mark.parametrize("path", list(scenarios.PATHS))
def test_sigkill_mid_reply_leaves_one_full_reply_and_each_effect_once(path, make_cluster, user, rng, chaos_counts):
    cluster = make_cluster()
    cluster.start_beat()
    cluster.start_workers(2, pool="threads", concurrency=4)
    start_turn = scenarios.PATHS[path]
    kills = turns = 0
    while kills < KILLS_PER_PATH:
        assert turns < 3 * KILLS_PER_PATH, f"only {kills} of {turns} turns were still running when killed"
        turn = start_turn(user, turns)
        turns += 1
        kills += scenarios.kill_at_a_random_moment(cluster, turn, rng)
        scenarios.wait_until_settled()
        scenarios.assert_turn_outcome(turn, user)
        if path.startswith("delegation"):
            scenarios.assert_delegation_answered(turn)
        scenarios.assert_no_run_left_behind()
        scenarios.assert_runs_lost_only_with_their_worker(cluster.killed_pids)
    chaos_counts.update({"kills": kills, f"kills_{path}": kills, "turns": turns})
    record_recoveries(chaos_counts)
    assert Run.objects.filter(status=Run.Status.RECOVERED).count() >= kills


PREFORK_KILLS = 3


def kill_pool_child(worker, turn, rng) -> bool:
    """SIGKILL the pool child (not the worker) that runs the turn, at a random moment."""
    first = scenarios.wait_until_started(turn)
    running = runs.latest_in_chain(first)
    child = owner_pid(running)
    assert child is not None and child != worker.pid and worker.runs_pid(child), running.lease_owner
    time.sleep(rng.uniform(0.1, turn.seconds * 0.8))  # the chaos: a random moment of the stream
    if runs.latest_in_chain(first).status != Run.Status.RUNNING:
        return False
    os.kill(child, signal.SIGKILL)
    return True


@pytest.mark.timeout(180)
def test_sigkill_of_a_prefork_pool_child_is_recovered_without_the_sweeper(make_cluster, user, rng, chaos_counts):
    # No beat: the worker's peer watch sees its child's pid gone (agents_app.turns.peers), and the pool
    # notices its lost child and the task comes back (acks_late, reject_on_worker_lost); whichever
    # comes first must recover the turn on its own.
    cluster = make_cluster()
    [worker] = cluster.start_workers(1, pool="prefork", concurrency=2)
    for n in range(PREFORK_KILLS):
        turn = scenarios.user_message(user, n)
        chaos_counts["kills"] += kill_pool_child(worker, turn, rng)
        scenarios.wait_until_settled()
        scenarios.assert_turn_outcome(turn, user)
        scenarios.assert_no_run_left_behind()
        assert worker.alive, "killing a pool child must not take the worker down"
    chaos_counts["kills_prefork_child"] = chaos_counts["kills"]
    assert chaos_counts["kills"] >= PREFORK_KILLS - 1
    reasons = [r.history[-1].get("reason") for r in Run.objects.filter(status=Run.Status.RECOVERED)]
    assert reasons and set(reasons) <= {"task redelivered", "worker gone"}, reasons
    record_recoveries(chaos_counts)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_sigkill_of_the_whole_worker_is_recovered_by_the_next_worker(pool, make_cluster, user, rng, chaos_counts):
    # One worker and no beat: after the kill nothing runs until the replacement starts, and its
    # start-up sweep (worker_ready) must find the lost turn on its own.
    cluster = make_cluster()
    [worker] = cluster.start_workers(1, pool=pool, concurrency=2)
    turn = scenarios.user_message(user, 0)
    first = scenarios.wait_until_started(turn)
    time.sleep(rng.uniform(0.1, turn.seconds * 0.6))  # the chaos: a random moment of the stream
    assert runs.latest_in_chain(first).status == Run.Status.RUNNING, "the turn ended before the kill"
    worker.sigkill()  # the main process; prefork children die with it (PR_SET_PDEATHSIG)
    chaos_counts["kills"] += 1
    chaos_counts[f"kills_whole_worker_{pool}"] += 1
    lost = runs.latest_in_chain(first)
    assert lost.status == Run.Status.RUNNING, "nobody may touch the run while no worker is alive"
    cluster.start_workers(1, pool=pool, concurrency=2)
    scenarios.wait_until_settled()
    scenarios.assert_turn_outcome(turn, user)
    scenarios.assert_no_run_left_behind()
    lost.refresh_from_db()
    assert lost.status == Run.Status.RECOVERED
    record_recoveries(chaos_counts)
