"""Health: the staff page and what it reads — the database, Redis, the broker, the workers'
heartbeats (a real embedded worker, and a real Celery worker process that is then killed), the
queue and its oldest run."""

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app import health
from agents_app.models import Run, Worker

pytestmark = pytest.mark.django_db


def wait_for(predicate, timeout=20.0, what="it"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_with_no_worker_the_page_says_so_and_shows_the_oldest_queued_run(staff_client, asked):
    run = asked("waiting")
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=3))
    report = health.health()
    assert report.probes[0].ok and report.queue.queued == 1 and report.queue.oldest_queued.pk == run.pk
    assert any("No worker is alive" in p for p in report.problems)
    assert any("oldest queued run has waited 18" in p for p in report.problems)
    page = staff_client.get("/admin/health/").content.decode()
    assert "Needs a look" in page and "No worker is alive" in page
    assert str(run.pk)[:8] in page and "answers" in page
    assert "redis://" not in page and "postgres://" not in page  # no connection strings


@pytest.mark.django_db(transaction=True)  # the worker's own thread writes its heartbeat
def test_an_embedded_worker_keeps_its_heartbeat_and_says_when_it_stops(staff_client, settings):
    from hub.embedded import EmbeddedWorker

    settings.HUB_WORKER_HEARTBEAT_SECONDS = 0.2
    worker = EmbeddedWorker(concurrency=1)
    worker.start()
    try:
        # This process's own: a live hub of another test package may have left its row behind.
        row = wait_for(lambda: Worker.objects.filter(name__startswith="embedded@", pid=os.getpid()).first(),
                       what="a heartbeat")
        first_beat = row.heartbeat_at
        wait_for(lambda: Worker.objects.get(pk=row.pk).heartbeat_at > first_beat, what="a second heartbeat")
        assert row.pool == "thread" and row.concurrency == 1
        states = {s.worker.name: s.state for s in health.worker_states()}
        assert states[row.name] == "live"
        page = staff_client.get("/admin/health/").content.decode()
        assert row.name in page and ">live<" in page
    finally:
        worker.stop()
    row.refresh_from_db()
    assert row.stopped_at is not None
    assert {s.worker.name: s.state for s in health.worker_states()}[row.name] == "stopped"


@pytest.mark.needs_redis
@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)  # a worker process reads what this test wrote
def test_a_celery_worker_process_is_live_runs_a_turn_and_goes_silent_when_killed(staff_client, scripted_agent,
                                                                                 tmp_path, settings):
    from chats import services
    from tests.chaos.cluster import Cluster

    settings.HUB_WORKER_HEARTBEAT_SECONDS = 0.3
    cluster = Cluster(tmp_path, HUB_WORKER_HEARTBEAT_SECONDS="0.3")
    try:
        (worker,) = cluster.start_workers(1, pool="prefork", concurrency=2)
        row = wait_for(lambda: Worker.objects.filter(name=worker.hostname).first(), what="the worker's row")
        assert row.pid == worker.pid and row.pool == "prefork" and len(row.pids) == 2
        assert all(worker.runs_pid(pid) for pid in row.pids)

        agent = scripted_agent(reply="Hello from a real worker.")
        trigger = services.send_message(chat=agent.main_chat, content="hi")
        run = wait_for(lambda: Run.objects.filter(trigger_message=trigger, status="succeeded").first(),
                       what="the turn to finish")
        assert int(run.lease_owner.split(":")[1]) in row.pids  # the run names the process that ran it
        assert run.delta_count >= 1
        assert health.health().problems == []

        worker.sigkill()
        wait_for(lambda: {s.worker.name: s.state for s in health.worker_states()}[row.name] == "silent",
                 timeout=5, what="the killed worker to go silent")
        page = staff_client.get("/admin/health/").content.decode()
        assert ">silent<" in page and "No worker is alive" in page
    finally:
        cluster.shutdown()
