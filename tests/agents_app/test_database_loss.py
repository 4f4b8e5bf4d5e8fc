"""A turn whose database goes away mid-reply: it writes on with a fresh connection when the
database is back in time, and otherwise stops its model and leaves a single reply to recovery.

The faults are real: the turn's PostgreSQL session is terminated (pg_terminate_backend) from
another connection, and the test database refuses new sessions for a while (ALLOW_CONNECTIONS),
as during a restart. Only the test database is touched.
"""

import ctypes
import time

import pytest
from django.conf import settings as django_settings
from django.db import connection

from agents_app.models import Run
from agents_app.turns import recovery
from chats import services
from chats.models import Message
from chats.streams import replay_buffer
from tests.agents_app.test_turns import lose_lease, run_in_thread, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Every word of this reply is written once, in its place, whatever the database does. " * 6


class OutsideConnection:
    """A session on the server's `postgres` database that cuts the test database's sessions and
    refuses new ones, as a restart would."""

    def __init__(self):
        import psycopg

        db = django_settings.DATABASES["default"]
        self.name = db["NAME"]
        self.session = psycopg.connect(host=db.get("HOST") or "127.0.0.1", port=db.get("PORT") or 5432,
                                       user=db.get("USER") or None, password=db.get("PASSWORD") or None,
                                       dbname="postgres", autocommit=True, connect_timeout=5)
        self.started = self.session.execute("SELECT now()").fetchone()[0]

    def cut(self) -> int:
        """Terminate every session the test opened on the test database (this thread's is closed
        first); returns how many there were. Sessions older than the test are left alone: idle
        connections this process keeps elsewhere (a Playwright greenlet's context holds its own)
        would otherwise fail a later test that finds them cut."""
        connection.close()
        rows = self.session.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND backend_start >= %s",
            [self.name, self.started],
        ).fetchall()
        return len(rows)

    def refuse(self) -> int:
        """No new session on the test database from now on, and the open ones cut."""
        self._allow_connections(False)
        return self.cut()

    def allow(self) -> None:
        self._allow_connections(True)

    def _allow_connections(self, allowed: bool) -> None:
        from psycopg import sql

        self.session.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(self.name), sql.SQL("true" if allowed else "false")))

    def close(self) -> None:
        self.allow()
        self.session.close()


@pytest.fixture
def database():
    outside = OutsideConnection()
    yield outside
    outside.close()


def start_turn(agent):
    """The turn of a question to agent, running in a thread of its own, once it streams."""
    run = Run.objects.get(trigger_message=services.send_message(chat=agent.main_chat, content="x"))
    thread, outcome = run_in_thread(run.pk)
    assert wait_for(lambda: Run.objects.get(pk=run.pk).reply_message_id is not None)
    reply_id = Run.objects.get(pk=run.pk).reply_message_id
    assert wait_for(lambda: len(streamed(reply_id)) > 30)
    return run, reply_id, thread, outcome


def streamed(reply_id) -> str:
    """What a tab that (re)connects is given: the reply's replay buffer."""
    return replay_buffer().read(reply_id)["text"]


def at_full_speed(agent) -> None:
    """The continuation streams the rest without the script's pauses (the same text)."""
    agent.settings["script"]["delay"] = 0
    agent.save()


def assert_answered_once(agent, text: str) -> None:
    (reply,) = Message.objects.filter(sender_agent=agent, kind="message")
    assert reply.status == "final"
    assert reply.content == text


def assert_stream_stopped(reply_id, full: str) -> str:
    """The turn's model streams nothing more (the buffer stays as it is), and stopped early."""
    before = streamed(reply_id)
    time.sleep(0.5)  # several model chunks and relay ticks
    assert streamed(reply_id) == before
    assert full.startswith(before) and len(before) < len(full)
    return before


@pytest.mark.needs_postgres
def test_a_turn_whose_connection_is_cut_writes_on_with_a_fresh_one(scripted_agent, database):
    agent = scripted_agent(reply=REPLY, chunk=4, delay=0.015)
    run, reply_id, thread, outcome = start_turn(agent)
    assert database.cut() >= 1
    thread.join(30)
    assert outcome.get("value") == "succeeded"
    assert_answered_once(agent, REPLY)
    run.refresh_from_db()
    assert run.status == "succeeded" and Run.objects.count() == 1  # no recovery was needed
    assert run.checkpoint_count > 1


@pytest.mark.needs_postgres
def test_a_turn_waits_out_a_database_restart_shorter_than_its_lease(scripted_agent, database):
    agent = scripted_agent(reply=REPLY, chunk=4, delay=0.015)
    run, reply_id, thread, outcome = start_turn(agent)
    database.refuse()
    at_the_cut = len(streamed(reply_id))
    time.sleep(1.0)
    assert thread.is_alive()
    assert len(streamed(reply_id)) > at_the_cut  # the reply streams on while the database is away
    database.allow()
    thread.join(30)
    assert outcome.get("value") == "succeeded"
    assert_answered_once(agent, REPLY)
    assert list(Run.objects.values_list("status", flat=True)) == ["succeeded"]


@pytest.mark.needs_postgres
def test_a_reply_that_ends_while_the_database_is_away_settles_when_it_is_back(scripted_agent, database):
    agent = scripted_agent(reply=REPLY, chunk=8, delay=0.01)
    run, reply_id, thread, outcome = start_turn(agent)
    database.refuse()
    assert wait_for(lambda: streamed(reply_id) == REPLY)  # the model has ended
    time.sleep(0.3)
    assert thread.is_alive()
    database.allow()
    thread.join(30)
    assert outcome.get("value") == "succeeded"
    assert_answered_once(agent, REPLY)
    assert list(Run.objects.values_list("status", flat=True)) == ["succeeded"]


@pytest.mark.needs_postgres
def test_a_turn_delivered_while_the_database_is_away_starts_when_it_is_back(scripted_agent, database):
    agent = scripted_agent(reply="Short and sure.")
    run = Run.objects.get(trigger_message=services.send_message(chat=agent.main_chat, content="x"))
    database.refuse()
    thread, outcome = run_in_thread(run.pk)
    time.sleep(0.5)
    assert thread.is_alive()
    database.allow()
    thread.join(30)
    assert outcome.get("value") == "succeeded"
    assert_answered_once(agent, "Short and sure.")


@pytest.mark.needs_postgres
def test_a_turn_without_a_database_for_its_lease_stops_its_model_and_is_continued_once(
        scripted_agent, database, settings, run_now):
    settings.HUB_LEASE_SECONDS = 3
    agent = scripted_agent(reply=REPLY * 2, chunk=3, delay=0.02)  # ~6 s uninterrupted
    run, reply_id, thread, outcome = start_turn(agent)
    database.refuse()
    thread.join(15)
    assert outcome.get("value") == "database_lost"
    kept = assert_stream_stopped(reply_id, REPLY * 2)
    database.allow()

    run.refresh_from_db()
    assert run.status == "running"  # the database never came back within the lease
    # The buffer went back to the last checkpoint: no text on screen that the continuation
    # writes again.
    assert run.checkpoint.get("text", "") == kept  # none written yet on a slow machine: empty
    assert Message.objects.get(pk=reply_id).content == kept
    assert wait_for(lambda: recovery.sweep()["recovered"] == 1, timeout=5)
    at_full_speed(agent)
    assert run_now() == ["succeeded"]
    assert_answered_once(agent, REPLY * 2)
    run.refresh_from_db()
    assert run.status == "recovered" and Run.objects.get(continues=run).status == "succeeded"


@pytest.mark.needs_postgres
def test_a_turn_that_gave_up_hands_its_run_to_recovery_when_the_database_is_back_in_time(
        scripted_agent, database, settings, run_now):
    settings.HUB_LEASE_SECONDS = 6
    agent = scripted_agent(reply=REPLY * 3, chunk=3, delay=0.02)  # ~9 s uninterrupted
    run, reply_id, thread, outcome = start_turn(agent)
    database.refuse()
    longest = [0]

    def buffer_went_back():
        length = len(streamed(reply_id))
        longest[0] = max(longest[0], length)
        return length < longest[0]

    assert wait_for(buffer_went_back, timeout=10)  # the turn gave up and reset the replay buffer
    database.allow()
    thread.join(10)
    assert outcome.get("value") == "database_lost"
    run.refresh_from_db()
    assert run.status == "recovered" and run.history[-1]["reason"] == "database lost"
    at_full_speed(agent)
    assert run_now() == ["succeeded"]
    assert_answered_once(agent, REPLY * 3)


def test_a_turn_whose_thread_is_killed_stops_its_model(scripted_agent, run_now):
    import threading

    from django.db import close_old_connections

    from agents_app.turns.execution import execute_run

    agent = scripted_agent(reply=REPLY, chunk=3, delay=0.02)  # ~3 s uninterrupted
    run = Run.objects.get(trigger_message=services.send_message(chat=agent.main_chat, content="x"))
    ended = []

    def worker():
        try:
            ended.append(execute_run(run.pk))
        except SystemExit:
            ended.append("killed")
        finally:
            close_old_connections()

    thread = threading.Thread(target=worker)
    thread.start()
    assert wait_for(lambda: Run.objects.get(pk=run.pk).reply_message_id is not None)
    reply_id = Run.objects.get(pk=run.pk).reply_message_id
    assert wait_for(lambda: len(streamed(reply_id)) > 30)
    assert ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit)) == 1
    thread.join(10)
    assert ended == ["killed"]
    assert_stream_stopped(reply_id, REPLY)

    lose_lease(run)
    assert recovery.sweep()["recovered"] == 1
    at_full_speed(agent)
    assert run_now() == ["succeeded"]
    assert_answered_once(agent, REPLY)
