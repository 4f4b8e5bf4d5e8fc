"""hub_repair: each finding is made for real (services, or SQL where only a crash could make it),
found by a dry run that changes nothing, fixed by --fix, and nothing else changes."""

import io
import os
import re
import socket
import subprocess
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import TestCase
from django.utils import timezone

from agents_app.models import Agent, Run
from agents_app.turns import runs
from chats import services
from chats.models import Chat, Membership, Message
from chats.streams import replay_buffer
from tests.admin.conftest import changed, lose_lease, snapshot, start_streaming

pytestmark = pytest.mark.django_db


def repair(*args) -> tuple[str, int]:
    """Run `manage.py hub_repair` with args; returns (output, exit status)."""
    out = io.StringIO()
    # What a fix sends after its commit (a run's task) is sent when the command ends, as if the
    # test's transaction had committed.
    with TestCase.captureOnCommitCallbacks(execute=True):
        try:
            call_command("hub_repair", *args, "--width", "1000", stdout=out)
            return out.getvalue(), 0
        except CommandError as exc:
            return out.getvalue() + str(exc), exc.returncode


def found(output: str, check: str) -> str:
    """The line of a check in the report ("ok" or "N found")."""
    line = next(line for line in output.splitlines() if f"[{check}]" in line)
    return line.rsplit(": ", 1)[1]


def fix_and_diff(check: str):
    """A dry run (must change nothing), then --fix of that check; returns (outputs, what changed)."""
    before = snapshot()
    dry, status = repair("--check", check)
    assert status == 1 and snapshot() == before, "a dry run changed something"
    fixed, status = repair("--check", check, "--fix")
    assert status == 0, fixed
    again, status = repair("--check", check)
    assert status == 0 and found(again, check) == "ok", again
    return dry, fixed, changed(before, snapshot())


# --- Streaming messages with no live run -------------------------------------------------------

def test_a_stuck_streaming_reply_is_settled_as_interrupted_with_the_text_it_had(asked):
    run = asked("go")
    token, reply = start_streaming(run, "The quick")
    # The worker streamed further than its last checkpoint, then its run was ended without
    # settling the reply (a crash between the two writes of an older version did this).
    replay_buffer().append(reply.pk, {"text": " brown fox"})
    runs.finish(run.pk, token, Run.Status.FAILED, error="boom")
    Message.objects.filter(pk=reply.pk).update(status="streaming")
    orphan = asked("again")
    _, orphan_reply = start_streaming(orphan, "Half")
    Run.objects.filter(pk=orphan.pk).delete()  # its run is gone altogether (run = NULL)
    healthy = asked("fine")
    start_streaming(healthy, "live")  # streaming under a live run: not stuck

    dry, fixed, diff = fix_and_diff("stuck_streams")

    assert found(dry, "stuck_streams") == "2 found"
    assert f"message {reply.pk}" in dry and f"its run {str(run.pk)[:8]} is failed" in dry
    assert f"message {orphan_reply.pk}" in dry and "it has no run" in dry
    reply.refresh_from_db()
    orphan_reply.refresh_from_db()
    assert reply.status == "interrupted" and reply.content == "The quick brown fox"
    assert orphan_reply.status == "interrupted" and orphan_reply.content == "Half"
    assert "settled as interrupted; 19 characters kept" in fixed
    assert diff == {"Message": {reply.pk: {"status", "content"}, orphan_reply.pk: {"status"}}}


# --- Runs running past their lease -----------------------------------------------------------

def test_a_run_past_its_lease_is_recovered_and_continued(asked, run_now):
    run = asked("go")
    _, reply = start_streaming(run, "The quick brown")
    lose_lease(run)
    live = asked("other")
    start_streaming(live, "fine")  # under a live lease: left alone

    dry, fixed, diff = fix_and_diff("expired_leases")

    assert found(dry, "expired_leases") == "1 found" and re.search(r"its lease ran out 6\d s ago", dry)
    run.refresh_from_db()
    reply.refresh_from_db()
    continuation = Run.objects.get(continues=run)
    assert run.status == "recovered" and run.history[-1]["reason"] == "repair: lease expired"
    assert reply.status == "interrupted" and reply.content == "The quick brown"
    assert diff["Run"][run.pk] >= {"status", "checkpoint", "finished_at", "lease_expires_at", "history"}
    assert diff["Run"][continuation.pk] == "added"
    assert set(diff) == {"Run", "Message"} and set(diff["Run"]) == {run.pk, continuation.pk}
    assert set(diff["Message"]) == {reply.pk}
    Run.objects.filter(pk=live.pk).update(status="succeeded")  # let the worker below take only ours
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "The quick brown fox jumps over the lazy dog."


def test_a_run_whose_worker_process_is_gone_is_found_before_its_lease_ends(asked):
    run = asked("go")
    start_streaming(run, "abc")
    dead = subprocess.Popen(["true"])
    dead.wait()
    Run.objects.filter(pk=run.pk).update(lease_owner=f"{socket.gethostname()}:{dead.pid}:1")
    assert dead.pid != os.getpid()

    dry, _, diff = fix_and_diff("expired_leases")

    assert f"its worker process ({socket.gethostname()}:{dead.pid}:1) is gone" in dry
    run.refresh_from_db()
    assert run.status == "recovered"


# --- Runs never sent to a worker --------------------------------------------------------------

def test_a_run_never_sent_to_a_worker_is_sent(asked):
    run = asked("go")
    # The process that queued it died between the commit and sending the task.
    Run.objects.filter(pk=run.pk).update(dispatched_at=None, created_at=timezone.now() - timedelta(minutes=5))
    fresh = asked("just now")
    Run.objects.filter(pk=fresh.pk).update(dispatched_at=None)  # within the grace: being sent now

    dry, fixed, diff = fix_and_diff("undispatched_runs")

    assert found(dry, "undispatched_runs") == "1 found" and "queued 5 min ago and never sent" in dry
    assert "sent to the workers" in fixed
    assert diff == {"Run": {run.pk: {"dispatched_at"}}}


# --- Memberships of deleted agents ------------------------------------------------------------

def test_a_deleted_agent_still_in_a_chat_is_removed(user, make_agent, scripted_agent):
    keeper = scripted_agent(name="Keeper")
    gone = make_agent(user, name="Gone")
    chat = services.create_chat(owner=user, title="Team", agents=[keeper, gone])
    # Deleted by a path that skipped delete_agent's clean-up (an old version, or SQL).
    Agent.objects.filter(pk=gone.pk).update(deleted_at=timezone.now())
    membership = Membership.objects.get(chat=chat, agent=gone)
    main = Membership.objects.get(chat=gone.main_chat, agent=gone)

    dry, fixed, diff = fix_and_diff("deleted_agent_memberships")

    assert found(dry, "deleted_agent_memberships") == "2 found" and "Gone in 'Team'" in dry
    assert diff == {"Membership": {membership.pk: "removed", main.pk: "removed"}}
    assert list(chat.memberships.values_list("agent__name", flat=True)) == ["Keeper"]


# --- Chats whose preview or updated time disagree with their messages --------------------------

def test_chat_previews_and_updated_times_are_set_from_their_messages(user):
    stale = services.create_chat(owner=user, title="Stale preview")
    services.send_message(chat=stale, content="first")
    services.send_message(chat=stale, content="the   newest\nword")
    Chat.objects.filter(pk=stale.pk).update(last_message_preview="first")
    behind = services.create_chat(owner=user, title="Behind")
    newest = services.send_message(chat=behind, content="hello")
    Chat.objects.filter(pk=behind.pk).update(updated_at=newest.created_at - timedelta(hours=2))
    future = services.create_chat(owner=user, title="Future")
    said = services.send_message(chat=future, content="hi")
    Chat.objects.filter(pk=future.pk).update(updated_at=timezone.now() + timedelta(days=3))
    fine = services.create_chat(owner=user, title="Fine")
    services.send_message(chat=fine, content="ok")
    forked = services.fork_chat(chat=fine, at_message=fine.messages.get())  # a fork keeps its own times

    dry, fixed, diff = fix_and_diff("chat_summaries")

    assert found(dry, "chat_summaries") == "3 found"
    assert "preview shows «first» but the newest message says «the newest word»" in dry
    assert "before its newest message" in dry and "is in the future" in dry
    assert diff == {"Chat": {stale.pk: {"last_message_preview"}, behind.pk: {"updated_at"},
                             future.pk: {"updated_at"}}}
    stale.refresh_from_db()
    behind.refresh_from_db()
    future.refresh_from_db()
    assert stale.last_message_preview == "the newest word"
    assert behind.updated_at == newest.created_at
    assert future.updated_at == said.created_at
    assert forked.pk not in diff["Chat"] and fine.pk not in diff["Chat"]


# --- Search rows out of step with their messages ----------------------------------------------

@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)  # PostgreSQL builds no index in a transaction with pending triggers
def test_a_missing_search_index_is_built_again(user):
    from chats import search

    chat = services.create_chat(owner=user, title="Pelican notes")
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX chat_text_fts")
    try:
        dry, fixed, diff = fix_and_diff("search_index")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("CREATE INDEX IF NOT EXISTS chat_text_fts ON chats_chat "
                           "USING GIN (to_tsvector('simple', title || ' ' || description))")
    assert "search index chat_text_fts" in dry and "is missing" in dry
    assert diff == {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = 'chat_text_fts'")
        assert cursor.fetchone() == (True,)
    assert [h.chat_id for h in search.search_chats(owner=user, query="pelican")] == [str(chat.pk)]


@pytest.mark.needs_postgres
def test_postgres_search_rows_out_of_step_are_rebuilt(user):
    from chats import search

    chat = services.create_chat(owner=user, title="Birds")
    message = services.send_message(chat=chat, content="pelican migration")
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM chats_message_search WHERE message_id = %s", [message.pk])
    assert search.search_messages(owner=user, query="pelican") == []

    dry, fixed, diff = fix_and_diff("search_index")

    assert "search rows of chats_message" in dry and "rebuilt from the rows" in fixed
    assert diff == {}
    assert [h.message_id for h in search.search_messages(owner=user, query="pelican")] == [message.pk]


@pytest.mark.needs_postgres
def test_missing_postgres_search_triggers_are_made_again_and_every_message_indexed(user):
    from chats import search

    chat = services.create_chat(owner=user, title="Birds")
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER chats_message_search_write ON chats_message")
    message = services.send_message(chat=chat, content="heron sighting")  # not indexed now
    assert search.search_messages(owner=user, query="heron") == []

    dry, fixed, diff = fix_and_diff("search_index")

    assert "search triggers" in dry and "chats_message_search_write" in dry
    assert diff == {}
    assert [h.message_id for h in search.search_messages(owner=user, query="heron")] == [message.pk]
    later = services.send_message(chat=chat, content="heron again")
    assert {h.message_id for h in search.search_messages(owner=user, query="heron")} == {message.pk, later.pk}


@pytest.mark.sqlite_only
def test_search_rows_out_of_step_are_rebuilt(user):
    from chats import search, search_sql

    chat = services.create_chat(owner=user, title="Birds")
    message = services.send_message(chat=chat, content="pelican migration")
    with connection.cursor() as cursor:
        # The index loses a row (a crash of an older version, or a manual edit).
        cursor.execute("INSERT INTO chats_message_fts(chats_message_fts, rowid, content) VALUES ('delete', %s, %s)",
                       [message.pk, message.content])
        cursor.execute("INSERT INTO chats_message_owner_fts(chats_message_owner_fts, rowid, body) "
                       "VALUES ('delete', %s, %s)", [message.pk, search_sql.owner_words(user.pk, message.content)])
        cursor.execute("DELETE FROM chats_chat_fts")
    assert search.search_messages(owner=user, query="pelican") == []

    dry, fixed, diff = fix_and_diff("search_index")

    assert "search rows of chats_message" in dry and "search rows of chats_chat" in dry
    assert diff == {}
    assert [h.message_id for h in search.search_messages(owner=user, query="pelican")] == [message.pk]
    assert [h.chat_id for h in search.search_chats(owner=user, query="birds")] == [str(chat.pk)]


@pytest.mark.sqlite_only
def test_missing_search_triggers_are_made_again_and_the_index_caught_up(user):
    from chats import search

    chat = services.create_chat(owner=user, title="Birds")
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER chats_message_fts_ai")
    message = services.send_message(chat=chat, content="heron sighting")  # not indexed now

    dry, fixed, diff = fix_and_diff("search_index")

    assert "search triggers" in dry and "1 missing (chats_message_fts_ai)" in dry
    assert diff == {}
    assert [h.message_id for h in search.search_messages(owner=user, query="heron")] == [message.pk]
    later = services.send_message(chat=chat, content="heron again")
    assert {h.message_id for h in search.search_messages(owner=user, query="heron")} == {message.pk, later.pk}


# --- All at once, recorded ---------------------------------------------------------------------

def test_fix_records_each_repair_for_the_staff_member_and_exits_zero(asked, staff):
    stuck = asked("one")
    token, reply = start_streaming(stuck, "abc")
    runs.finish(stuck.pk, token, Run.Status.FAILED)
    Message.objects.filter(pk=reply.pk).update(status="streaming")
    Chat.objects.filter(pk=stuck.chat_id).update(last_message_preview="wrong")

    output, status = repair("--fix", "--as", "support")

    assert status == 0 and "2 problems found, 2 fixed, 0 left." in output
    entries = {e.object_id: e.change_message for e in LogEntry.objects.filter(user=staff)}
    assert entries[str(reply.pk)].startswith("Repair (stuck_streams): streaming since")
    assert entries[str(stuck.chat_id)].startswith("Repair (chat_summaries): preview shows «wrong»")
    assert repair()[1] == 0


def test_as_must_name_a_staff_member(user):
    output, status = repair("--fix", "--as", user.username)
    assert status == 1 and "no staff user" in output


# --- The admin's repair page ------------------------------------------------------------------

def broken_pair(asked):
    """A stuck reply and a chat with a wrong preview (the reply's own chat)."""
    run = asked("one")
    token, reply = start_streaming(run, "abc")
    runs.finish(run.pk, token, Run.Status.FAILED)
    Message.objects.filter(pk=reply.pk).update(status="streaming")
    Chat.objects.filter(pk=run.chat_id).update(last_message_preview="wrong")
    return reply, Chat.objects.get(pk=run.chat_id)


def test_the_repair_page_lists_findings_and_fixes_only_the_ticked_checks(staff_client, staff, asked):
    reply, chat = broken_pair(asked)
    landing = staff_client.get("/admin/repair/").content.decode()
    assert "Check now" in landing and "Streaming messages with no live run" in landing
    assert f"message {reply.pk}" not in landing  # opening the page runs nothing
    before = snapshot()
    page = staff_client.get("/admin/repair/?run=1").content.decode()
    assert snapshot() == before
    assert "2 problems found" in page and f"message {reply.pk}" in page and "preview shows «wrong»" in page
    assert 'value="stuck_streams"' in page and 'value="chat_summaries"' in page

    response = staff_client.post("/admin/repair/", {"check": ["stuck_streams"]})

    page = response.content.decode()
    assert response.status_code == 200 and "1 problem found, 1 fixed, 0 left." in page
    reply.refresh_from_db()
    chat.refresh_from_db()
    assert reply.status == "interrupted" and chat.last_message_preview == "wrong"
    assert LogEntry.objects.filter(user=staff, object_id=str(reply.pk)).count() == 1
    assert not LogEntry.objects.filter(object_id=str(chat.pk)).exists()
    assert "1 found" in staff_client.get("/admin/repair/?run=1").content.decode()
    only = staff_client.get("/admin/repair/?run=1&check=stuck_streams").content.decode()
    assert "nothing found" in only and "Chats whose preview" not in only


def test_a_staff_member_who_may_not_change_can_look_but_not_fix(client, django_user_model, asked):
    reply, _ = broken_pair(asked)
    viewer = django_user_model.objects.create_user("viewer", password="pass-for-tests-1", is_staff=True)
    client.force_login(viewer)
    page = client.get("/admin/repair/?run=1").content.decode()
    assert "You may look but not fix" in page and "Fix the ticked checks" not in page
    assert client.post("/admin/repair/", {"check": ["stuck_streams"]}).status_code == 403
    reply.refresh_from_db()
    assert reply.status == "streaming"
