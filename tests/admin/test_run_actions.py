"""Run actions in the admin: recover now, cancel, retry — each through its service, each saying
what it did and recorded in the admin history (LogEntry)."""

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.messages import get_messages
from django.urls import reverse

from agents_app.models import Run
from chats.models import Message
from tests.admin.conftest import lose_lease, start_streaming

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/agents_app/run/"


def act(client, action, *runs):
    """Run an admin action from the runs list, as staff tick the rows and pick it."""
    response = client.post(CHANGELIST, {"action": action, "_selected_action": [str(r.pk) for r in runs],
                                        "index": 0}, follow=True)
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def logged(obj) -> list[str]:
    return list(LogEntry.objects.filter(object_id=str(obj.pk)).values_list("change_message", flat=True))


def test_recover_now_takes_a_run_from_a_live_but_hung_worker(staff_client, asked, run_now):
    run = asked("go")
    token, reply = start_streaming(run, "The quick brown")  # lease still live: the worker hangs

    said = act(staff_client, "recover_now", run)

    run.refresh_from_db()
    reply.refresh_from_db()
    assert run.status == "recovered" and "recovered by staff (support)" in run.history[-1]["reason"]
    assert reply.status == "interrupted" and reply.content == "The quick brown"
    continuation = Run.objects.get(continues=run)
    assert continuation.status == "queued" and continuation.kind == "continue"
    assert any("Recover now — 1 done" in m and "queued to go on" in m for m in said)
    assert logged(run) == [f"Recover now: recovered; run {str(continuation.pk)[:8]} (attempt 2) is queued to go on"]
    # The hung worker lost its lease: none of its writes land any more.
    from agents_app.turns import runs
    assert runs.save_checkpoint(run.pk, token, {"text": "The quick brown fox"}) is False
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "The quick brown fox jumps over the lazy dog." and reply.status == "final"


def test_recover_now_sends_a_queued_run_again_and_refuses_a_finished_one(staff_client, asked, run_now,
                                                                         django_capture_on_commit_callbacks):
    done = asked("one")
    run_now()
    waiting = asked("two")
    with django_capture_on_commit_callbacks(execute=True):
        said = act(staff_client, "recover_now", waiting, done)
    assert any("1 done" in m and "sent to the workers again" in m for m in said)
    assert any("1 not done" in m and "only a running or queued run can be recovered" in m for m in said)
    waiting.refresh_from_db()
    assert waiting.dispatched_at is not None
    assert logged(done) == []


def test_cancel_a_queued_run_a_running_one_and_one_whose_worker_is_gone(staff_client, asked):
    queued = asked("a")
    live = asked("b")
    _, live_reply = start_streaming(live, "partial b")
    gone = asked("c")
    _, gone_reply = start_streaming(gone, "partial c")
    lose_lease(gone)

    said = act(staff_client, "cancel_runs", queued, live, gone)

    queued.refresh_from_db()
    live.refresh_from_db()
    gone.refresh_from_db()
    gone_reply.refresh_from_db()
    assert queued.status == "cancelled"
    # A live worker is asked to stop (it settles the reply itself within a second).
    from agents_app.turns import runs
    assert live.status == "running" and live.cancel_requested and live.pk in runs.cancelled_among([live.pk])
    # No worker will ever stop the third: it is cancelled here, its text kept.
    assert gone.status == "cancelled" and "its worker was gone" in gone.history[-1]["reason"]
    assert gone_reply.status == "cancelled" and gone_reply.content == "partial c"
    assert any("3 done" in m for m in said)
    assert logged(gone) == ["Cancel: cancelled (its worker was gone); 9 characters of the reply kept"]
    assert len(logged(queued)) == len(logged(live)) == 1

    said = act(staff_client, "cancel_runs", queued)
    assert any("already cancelled" in m for m in said)


def test_retry_a_failed_run_answers_again_into_the_same_reply(staff_client, scripted_agent, run_now):
    from agents_app import services as agent_services
    from chats import services

    agent = scripted_agent(fail="upstream exploded")
    trigger = services.send_message(chat=agent.main_chat, content="Ada")
    assert run_now() == ["failed"]
    failed = Run.objects.get(trigger_message=trigger)
    reply = failed.reply_message
    assert reply.status == "error"
    # The provider is fixed; staff retry from the run's own page.
    agent_services.update_agent(agent=agent, settings={"script": {"reply": "Hello {prompt}."}})
    response = staff_client.post(reverse("admin:agents_app_run_act", args=[failed.pk, "retry_runs"]))
    assert response.status_code == 302 and response["Location"] == reverse("admin:agents_app_run_change",
                                                                           args=[failed.pk])
    retry = Run.objects.get(continues=failed)
    assert retry.status == "queued" and retry.attempt == 1 and retry.reply_message_id == reply.pk
    assert "retry of run" in retry.history[0]["reason"] and "support" in retry.history[0]["reason"]
    reply.refresh_from_db()
    assert reply.status == "streaming" and reply.run_id == retry.pk
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.status == "final" and reply.content == "Hello Ada."
    assert "error" not in reply.data
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1
    assert logged(failed) == [f"Retry: run {str(retry.pk)[:8]} queued to answer again"]

    # Retrying again is refused: the turn was already answered by a later run.
    said = act(staff_client, "retry_runs", failed)
    assert any("already followed by run" in m for m in said)


def test_retry_refuses_a_run_that_is_still_going(staff_client, asked):
    run = asked("x")
    said = act(staff_client, "retry_runs", run)
    assert any("only a failed or cancelled run can be retried" in m for m in said)
    assert not Run.objects.filter(continues=run).exists()
    assert logged(run) == []


def test_actions_need_the_change_permission(client, django_user_model, asked):
    viewer = django_user_model.objects.create_user("viewer", password="pass-for-tests-1", is_staff=True)
    from django.contrib.auth.models import Permission

    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    client.force_login(viewer)
    run = asked("x")
    assert client.get(reverse("admin:agents_app_run_change", args=[run.pk])).status_code == 200
    assert client.post(reverse("admin:agents_app_run_act", args=[run.pk, "cancel_runs"])).status_code == 404
    run.refresh_from_db()
    assert run.status == "queued"
