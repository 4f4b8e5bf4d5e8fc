"""Workers find a dead peer's turns at once (agents_app.turns.peers), not when its lease runs out.

Real Redis, real processes: a process that ran turns is killed for real (a child of this test),
or stands for a host that went silent; the watch of this process recovers its runs.
"""

import subprocess
import sys
import time

import pytest

from agents_app.models import Run
from agents_app.turns import peers, runs
from chats import services as chat_services

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client():
    client = peers._client()
    client.delete(peers.KEY)
    yield client
    client.delete(peers.KEY)


def held_run(make_agent, user, owner: str) -> Run:
    """A running run whose lease (30 s, far from expiring) is held by `owner` (host:pid)."""
    agent = make_agent(user, settings={"script": {"reply": "Hello there.", "chunk": 2}})
    chat_services.send_message(chat=agent.main_chat, content="hi")
    run = Run.objects.get(agent=agent)
    token = runs.claim(run.pk)
    Run.objects.filter(pk=run.pk).update(lease_owner=f"{owner}:4242")
    assert token is not None
    return Run.objects.get(pk=run.pk)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_process_on_this_host_that_died_is_taken_at_once(client):
    gone = peers.identity(dead_pid())
    client.zadd(peers.KEY, {gone: time.time()})  # its last beat: just now

    assert peers.beat_once(client, lambda: []) == [gone]
    assert client.zscore(peers.KEY, gone) is None


def test_a_silent_process_elsewhere_is_taken_only_after_the_silence(client, settings):
    settings.HUB_PEER_SILENT_SECONDS = 3.0
    client.zadd(peers.KEY, {"other-host:77": time.time() - 1.0})
    assert peers.beat_once(client, lambda: []) == []
    client.zadd(peers.KEY, {"other-host:77": time.time() - 3.5})
    assert peers.beat_once(client, lambda: []) == ["other-host:77"]


def test_our_own_live_processes_are_marked_and_never_taken(client):
    import os

    assert peers.beat_once(client, lambda: [os.getpid()]) == []
    assert client.zscore(peers.KEY, peers.identity()) is not None


def test_only_one_watcher_takes_a_gone_process(client):
    gone = peers.identity(dead_pid())
    client.zadd(peers.KEY, {gone: time.time()})
    other_watcher = peers._client()

    taken = peers.beat_once(client, lambda: []) + peers.beat_once(other_watcher, lambda: [])

    assert taken == [gone]


def test_the_runs_of_a_gone_process_recover_without_waiting_for_their_lease(client, make_agent, user):
    gone = "vanished-host:555"  # another host: only its silence tells, its lease is still good
    run = held_run(make_agent, user, gone)
    alive = held_run(make_agent, user, "other-host:99")
    assert not runs.lease_is_dead(run)

    assert peers.recover_runs_of(gone) == 1

    assert Run.objects.get(pk=run.pk).status == Run.Status.RECOVERED
    continuation = Run.objects.get(continues=run)
    assert continuation.status == Run.Status.QUEUED and continuation.kind in (Run.Kind.CONTINUE, Run.Kind.REPLY)
    assert Run.objects.get(pk=alive.pk).status == Run.Status.RUNNING  # someone else's: untouched


def test_the_watch_thread_recovers_a_silent_hosts_runs_within_a_second(client, make_agent, user, settings):
    settings.HUB_PEER_SILENT_SECONDS = 1.0
    run = held_run(make_agent, user, "vanished-host:1234")
    client.zadd(peers.KEY, {"vanished-host:1234": time.time()})
    watch = peers.Watch(lambda: [])
    began = time.monotonic()
    watch.start()
    try:
        while Run.objects.get(pk=run.pk).status == Run.Status.RUNNING and time.monotonic() - began < 10:
            time.sleep(0.05)
    finally:
        watch.stop()
    waited = time.monotonic() - began
    assert Run.objects.get(pk=run.pk).status == Run.Status.RECOVERED
    assert waited < settings.HUB_PEER_SILENT_SECONDS + 1.0 < settings.HUB_LEASE_SECONDS
