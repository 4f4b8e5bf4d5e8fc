"""A poison turn: a tool that SIGKILLs whatever worker runs it (the test-only `die` tool).

Each attempt takes a worker down; recovery must stop after HUB_MAX_RECOVERIES and fail the turn
with a reason on the reply, not feed it to worker after worker for ever.
"""

import time

import pytest

from agents_app import tools
from agents_app.models import Run
from agents_app.turns import runs
from chats import services as chat_services
from chats.models import Message
from tests.chaos import scenarios
from tests.chaos.cluster import TIMINGS, wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

MAX_RECOVERIES = int(TIMINGS["HUB_MAX_RECOVERIES"])


@pytest.mark.timeout(180)
def test_a_turn_that_kills_every_worker_fails_after_the_recoveries_with_a_reason(make_cluster, user, chaos_counts,
                                                                                 monkeypatch):
    # The workers register `die` (HUB_TEST_TOOLS); this process must know it too to save the agent.
    monkeypatch.setattr(tools, "REGISTRY", tools.REGISTRY | tools.TEST_TOOLS)
    cluster = make_cluster()
    cluster.start_beat()
    cluster.start_workers(2, pool="threads", concurrency=4)
    agent_script = scenarios.script("never written", [scenarios.effect("poison-a"), {"name": "die", "args": {}}])
    agent = scenarios.make_agent(user, "Poison", agent_script)
    trigger = chat_services.send_message(chat=agent.main_chat, content="drink this")
    first = wait_for(lambda: Run.objects.filter(trigger_message=trigger).first(), timeout=10, what="the run")

    def turn_failed():
        chaos_counts["poison_deaths"] += cluster.replace_dead_workers()
        return runs.latest_in_chain(first).status == Run.Status.FAILED

    wait_for(turn_failed, timeout=120, what="the poison turn to fail", every=0.1)
    last = runs.latest_in_chain(first)
    chain = Run.objects.filter(trigger_message=trigger).order_by("created_at")
    assert [r.attempt for r in chain] == list(range(1, MAX_RECOVERIES + 2))
    assert [r.status for r in chain] == ["recovered"] * MAX_RECOVERIES + ["failed"]
    assert f"interrupted {MAX_RECOVERIES + 1} times" in last.error
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert reply.status == Message.Status.ERROR and "stopped retrying" in reply.data["error"]
    assert scenarios.effect_counts(user)["poison-a"] == 1, "the step before the poison ran once, not per attempt"

    # Never a loop: with every worker back and a few sweeps later, nothing new was queued.
    chaos_counts["poison_deaths"] += cluster.replace_dead_workers()
    cluster.wait_all_ready()
    time.sleep(3 * float(TIMINGS["HUB_SWEEP_SECONDS"]))  # observing an absence needs some time
    assert Run.objects.filter(trigger_message=trigger).count() == MAX_RECOVERIES + 1
    assert all(worker.alive for worker in cluster.workers)
    scenarios.assert_no_run_left_behind()
    assert chaos_counts["poison_deaths"] == MAX_RECOVERIES + 1
    chaos_counts["recovered_runs"] += MAX_RECOVERIES
