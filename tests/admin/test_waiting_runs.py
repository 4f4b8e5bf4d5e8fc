"""Nothing waits silently: runs queued too long and the absence of a live worker are reported by
hub_repair (which cannot fix them, and says what to do instead of "Nothing to repair.") and by
the health page's verdict. Workers are real heartbeat rows (agents_app.workers), runs real
queued runs nobody takes."""

import io
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import TestCase
from django.utils import timezone

from agents_app import health, workers
from agents_app.models import Run, Worker

pytestmark = pytest.mark.django_db


def repair(*args) -> tuple[str, int]:
    """`manage.py hub_repair` with args: (output, exit status)."""
    out = io.StringIO()
    try:
        call_command("hub_repair", *args, "--width", "1000", stdout=out)
        return out.getvalue(), 0
    except CommandError as exc:
        return out.getvalue() + str(exc), exc.returncode


def found(output: str, check: str) -> str:
    line = next(line for line in output.splitlines() if f"[{check}]" in line)
    return line.rsplit(": ", 1)[1]


@pytest.fixture
def sent(asked):
    """sent(text) -> a queued run whose task went to the broker (as after a commit), that no
    worker takes."""

    def send(text: str) -> Run:
        with TestCase.captureOnCommitCallbacks(execute=True):
            run = asked(text)
        run.refresh_from_db()
        assert run.dispatched_at is not None
        return run

    return send


def queued_ago(run: Run, seconds: float) -> None:
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=seconds))


def live_worker(name="w1@host") -> None:
    workers.record_heartbeat(name=name, pool="threads", concurrency=4, pids=[1], started_at=timezone.now())


def test_runs_queued_ten_minutes_with_no_worker_are_reported_with_what_to_do(sent):
    run = sent("anyone there?")
    queued_ago(run, 600)

    output, status = repair()

    assert status == 1 and "Nothing to repair." not in output
    assert found(output, "no_live_worker") == "1 found" and found(output, "waiting_runs") == "1 found"
    assert "none has reported in the last day" in output
    assert re.search(r"1 run queued longer than 60 s \(the oldest queued run has waited 60\d s\)", output)
    assert str(run.pk)[:8] in output and "celery -A hub worker" in output
    assert "needs you: start a worker" in output
    assert "2 problems found; 2 need you: see what to do above." in output


def test_fix_cannot_start_a_worker_so_it_leaves_the_runs_queued_and_says_so(sent):
    run = sent("anyone there?")
    queued_ago(run, 600)

    output, status = repair("--fix")

    assert status == 1 and "2 problems found, 0 fixed, 2 left." in output
    assert "not fixed: the hub cannot do this itself; start a worker" in output
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_worker_that_went_silent_is_named_with_its_last_heartbeat(sent):
    run = sent("hello")
    live_worker("gone@host")
    Worker.objects.filter(name="gone@host").update(heartbeat_at=timezone.now() - timedelta(minutes=12))
    queued_ago(run, 30)  # younger than the threshold: not yet waiting, but nobody will take it

    output, status = repair()

    assert status == 1
    assert found(output, "waiting_runs") == "ok" and found(output, "no_live_worker") == "1 found"
    assert re.search(r"The last one \(gone@host\) went silent; its last heartbeat was 72\d s ago", output)


def test_with_a_live_worker_a_long_queue_blames_busy_workers_not_a_missing_one(sent):
    run = sent("hello")
    queued_ago(run, 120)
    live_worker()

    output, status = repair()

    assert status == 1 and found(output, "no_live_worker") == "ok" and found(output, "waiting_runs") == "1 found"
    assert "with 1 live worker: they are all busy, do not read the queue, or never got them" in output
    assert "needs you: see Health: add workers" in output


def test_a_hub_shut_down_cleanly_with_nothing_queued_has_nothing_to_repair():
    live_worker("done@host")
    workers.record_stopped(name="done@host")

    output, status = repair()

    assert status == 0 and output.strip().endswith("Nothing to repair.")


def test_how_long_a_run_may_wait_is_a_setting(sent, settings):
    run = sent("hello")
    live_worker()
    queued_ago(run, 20)
    settings.HUB_QUEUED_WARNING_SECONDS = 30
    assert found(repair("--check", "waiting_runs")[0], "waiting_runs") == "ok"

    settings.HUB_QUEUED_WARNING_SECONDS = 10
    output, status = repair("--check", "waiting_runs")

    assert status == 1 and "1 run queued longer than 10 s" in output


def test_the_health_page_verdict_names_the_waiting_runs_and_the_missing_worker(staff_client, sent):
    old, _young = sent("first"), sent("second")
    queued_ago(old, 300)

    report = health.health()
    page = staff_client.get("/admin/health/").content.decode()

    assert report.queue.waiting == 1 and report.queue.queued == 2 and not report.ok
    assert "Needs a look" in page and "No worker is alive" in page
    assert "1 run queued longer than 60 s" in page and "no worker is alive to take them" in page
    assert re.search(r'<span class="n">1</span>queued over 60 s', page)
    assert f"{str(old.pk)[:8]}</a> (" in page  # the oldest queued run, linked to its timeline


def test_the_repair_page_offers_no_fix_for_what_needs_a_person(staff_client, sent):
    queued_ago(sent("hello"), 300)

    page = staff_client.get("/admin/repair/?run=1&check=no_live_worker&check=waiting_runs").content.decode()

    assert "2 problems found; 2 need you" in page and "<strong>needs you:</strong> start a worker" in page
    assert 'aria-label="fix Runs waiting in the queue"' not in page and "Fix the ticked checks" not in page
