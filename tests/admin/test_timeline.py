"""A run's timeline: every state change with its time and worker, the delta and checkpoint counts,
each recovery and continuation, and the tool steps with their results."""

import pytest
from django.urls import reverse

from agents_app.models import Run
from agents_app.repair.selectors import run_timeline
from agents_app.turns import recovery, runs
from chats import services
from tests.admin.conftest import lose_lease

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)  # a tool step commits with its checkpoint, as in a worker
def test_the_timeline_of_a_recovered_turn_with_a_tool_step(staff_client, scripted_agent, run_now):
    agent = scripted_agent(reply="word " * 24, chunk=4, delay=0.02, tools=[("record_effect", {"key": "k1"})])
    trigger = services.send_message(chat=agent.main_chat, content="go")
    first = Run.objects.get(trigger_message=trigger)
    runs.claim(first.pk)  # a worker takes it and dies before producing anything
    lose_lease(first)
    recovery.sweep()
    assert run_now() == ["succeeded"]
    second = Run.objects.get(continues=first)
    second.refresh_from_db()

    # The counts were kept in the worker's memory and stored with its checkpoint writes.
    assert second.delta_count >= 10 and second.checkpoint_count >= 1
    assert first.pk != second.pk and Run.objects.get(pk=first.pk).delta_count == 0

    timeline = run_timeline(first)
    assert [r.pk for r in timeline.chain] == [first.pk, second.pk]
    steps = [(e.run.pk, e.what) for e in timeline.events]
    assert steps == [
        (first.pk, "queued"), (first.pk, "running"), (first.pk, "recovered"), (first.pk, "continued"),
        (second.pk, "queued"), (second.pk, "running"), (second.pk, "tool"), (second.pk, "succeeded"),
    ]
    tool = next(e for e in timeline.events if e.what == "tool")
    assert tool.result == "recorded k1" and "record_effect" in tool.detail
    assert all(e.worker for e in timeline.events if e.what in ("queued", "running", "recovered", "succeeded"))

    page = staff_client.get(reverse("admin:agents_app_run_timeline", args=[second.pk])).content.decode()
    assert "worker lost" in page and "record_effect" in page and "recorded k1" in page
    assert f"by run {str(second.pk)[:8]} (reply, attempt 2)" in page
    assert f"<td>{second.delta_count}</td><td>{second.checkpoint_count}</td>" in page
    assert second.lease_owner in page


def test_a_failed_turn_shows_its_error_first(staff_client, scripted_agent, run_now):
    agent = scripted_agent(fail="The provider answered 429: rate limited")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run_now()
    run = Run.objects.get(trigger_message=trigger)
    page = staff_client.get(reverse("admin:agents_app_run_timeline", args=[run.pk])).content.decode()
    assert "rate limited" in page.split("Every step")[0]  # said above the table
    assert "failed" in page
