"""A turn that outlasts the broker's visibility timeout: Redis hands its task out again while the
first copy still streams. The lease, not the broker, decides who runs: the second copy finds the
run taken under a live lease and writes nothing."""

import json

import pytest
import redis
from django.conf import settings

from agents_app.models import Run
from agents_app.turns import runs
from agents_app.turns.tasks import run_turn
from chats import services as chat_services
from tests.chaos import scenarios
from tests.chaos.cluster import wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

VISIBILITY_SECONDS = 2
LONG_REPLY = "A long answer that keeps streaming well past the broker's visibility timeout. " * 3


def unacked_tag_of(client, run_id) -> str | None:
    """The delivery tag under which kombu keeps the run's task unacknowledged, if it does."""
    for tag, raw in client.hgetall("unacked").items():
        payload = json.loads(raw)[0]
        if str(run_id) in payload.get("headers", {}).get("argsrepr", ""):
            return tag
    return None


@pytest.mark.timeout(120)
def test_a_task_redelivered_mid_turn_writes_nothing(make_cluster, user, chaos_counts):
    cluster = make_cluster(HUB_VISIBILITY_TIMEOUT=VISIBILITY_SECONDS)
    cluster.start_workers(2, pool="threads", concurrency=4)
    keys = ["slow-a", "slow-b"]
    agent_script = scenarios.script(LONG_REPLY, [scenarios.effect(k) for k in keys], delay=0.08)
    assert scenarios.streaming_seconds(agent_script, "") > 3 * VISIBILITY_SECONDS
    agent = scenarios.make_agent(user, "Slowpoke", agent_script)
    chat_services.send_message(chat=agent.main_chat, content="take your time")
    turn = scenarios.Turn([scenarios.Expected(agent, agent.main_chat, LONG_REPLY, keys)],
                          target=lambda: Run.objects.filter(agent=agent).first(), seconds=0)
    first = scenarios.wait_until_started(turn)

    broker = redis.Redis.from_url(settings.REDIS_URL)
    tag = wait_for(lambda: unacked_tag_of(broker, first.pk), timeout=10, what="the task to be unacknowledged")
    # kombu restores an overdue message to the queue, a worker takes the copy and acknowledges
    # it under the same tag: the tag is gone while the first copy is still running.
    wait_for(lambda: not broker.hexists("unacked", tag), timeout=VISIBILITY_SECONDS + 10,
             what="the broker to deliver the task again")
    assert Run.objects.get(pk=first.pk).status == Run.Status.RUNNING, "the turn ended before the redelivery"
    chaos_counts["redeliveries"] += 1
    for _ in range(2):  # and duplicates sent by hand, for good measure
        run_turn.delay(str(first.pk))
    chaos_counts["duplicates_sent"] += 2

    scenarios.wait_until_settled()
    scenarios.assert_turn_outcome(turn, user)
    scenarios.assert_no_run_left_behind()
    run = runs.latest_in_chain(first)
    assert run.pk == first.pk and run.status == Run.Status.SUCCEEDED and run.attempt == 1
    assert [entry["status"] for entry in run.history] == ["queued", "running", "succeeded"]
