"""PostgreSQL stopped at once (pg_ctl -m immediate) and started again while replies stream.

Two workers (threads pool) and beat run on a PostgreSQL cluster of the test's own (the shared
server is never stopped) and the test's Redis database. Questions to scripted agents keep every
task thread of both workers streaming; at a random moment of their streams the server goes down
and comes back a moment later. Each turn either waits the outage out (its writes tried again on a
fresh connection) or, when it could not write within its lease, stops its model and is continued
from its last checkpoint. Afterwards every question has exactly one final reply holding the
scripted text once, no run is left queued or running, both workers are the same live processes,
and questions asked after the restart are answered.

The questions are asked by `manage.py shell` on the private database, through the real services;
the test reads that database with psycopg.
"""

import json
import time

import psycopg
import pytest

from tests.chaos import scenarios
from tests.chaos.cluster import wait_for
from tests.chaos.postgres_server import PostgresServer

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

QUESTIONS = 8  # every task thread of both workers (four each) streams one
REPLY = "Reply to {prompt}: " + "the database restarts under this stream, and every word lands once. " * 6
DELAY = 0.03  # a reply streams for about five seconds
DOWN_SECONDS = 1.5
SETTLE_SECONDS = 60


def ask(label: str, count: int) -> None:
    """Run by `manage.py shell` on the private database: `count` scripted agents, each asked one
    question; prints what each reply must be, as JSON."""
    from django.contrib.auth import get_user_model

    from agents_app.scripted import full_reply
    from chats import services as chat_services

    user, _ = get_user_model().objects.get_or_create(username="restarted")
    expected = []
    for n in range(count):
        agent_script = scenarios.script(REPLY, delay=DELAY)
        agent = scenarios.make_agent(user, f"{label}{n}", agent_script)
        prompt = f"{label} question {n}"
        chat_services.send_message(chat=agent.main_chat, content=prompt)
        expected.append({"agent": agent.pk, "name": agent.name, "text": full_reply(agent_script, prompt)})
    print(json.dumps(expected))


def ask_questions(cluster, label: str, count: int) -> list[dict]:
    out = cluster.manage("shell", "-c", f"from tests.chaos.test_postgres_restart import ask; ask({label!r}, {count})")
    return json.loads(out.strip().splitlines()[-1])


class Database:
    """The private database, read from this process: a fresh connection per read, so a read
    during the outage fails (None) instead of leaving a broken connection behind."""

    def __init__(self, url: str):
        self.url = url

    def rows(self, query: str, args=()) -> list[tuple] | None:
        try:
            with psycopg.connect(self.url, connect_timeout=2) as conn:
                return conn.execute(query, args).fetchall()
        except psycopg.OperationalError:
            return None

    def streaming_owners(self) -> list[str] | None:
        """The lease owners of the runs whose replies stream (some text stored already)."""
        rows = self.rows("SELECT r.lease_owner FROM agents_app_run r JOIN chats_message m ON m.id = r.reply_message_id "
                         "WHERE r.status = 'running' AND m.content <> ''")
        return [owner for (owner,) in rows] if rows is not None else None

    def unfinished_runs(self) -> int | None:
        rows = self.rows("SELECT count(*) FROM agents_app_run WHERE status IN ('queued', 'running')")
        return rows[0][0] if rows is not None else None

    def replies(self, agent_id: int) -> list[tuple]:
        return self.rows("SELECT content, status FROM chats_message WHERE sender_agent_id = %s AND kind = 'message'",
                         [agent_id])

    def run_count(self) -> int:
        return self.rows("SELECT count(*) FROM agents_app_run")[0][0]

    def runs(self, agent_id: int) -> list[tuple]:
        return self.rows("SELECT kind, status, history->-1->>'reason', error FROM agents_app_run "
                         "WHERE agent_id = %s ORDER BY created_at", [agent_id])


def wait_until_settled(database: Database) -> None:
    wait_for(lambda: database.unfinished_runs() == 0, timeout=SETTLE_SECONDS,
             what="every run to end (waited out, or recovered and continued)", every=0.2)


def assert_answered_once(database: Database, expected: dict) -> None:
    replies = database.replies(expected["agent"])
    runs = database.runs(expected["agent"])
    assert len(replies) == 1, f"{expected['name']} left {len(replies)} replies: {replies} {runs}"
    content, status = replies[0]
    assert status == "final", (expected["name"], status, runs)
    assert content == expected["text"], (expected["name"], runs)


@pytest.fixture
def postgres():
    """Set up before the workers, so it is stopped after them."""
    with PostgresServer() as server:
        yield server


@pytest.mark.timeout(180)
def test_postgres_restart_mid_stream_leaves_one_full_reply_per_question(postgres, make_cluster, rng, chaos_counts):
    url = postgres.create_database("hub")
    database = Database(url)
    cluster = make_cluster(DATABASE_URL=url)
    cluster.manage("migrate", "--noinput", "-v", "0")
    cluster.start_beat()
    workers = cluster.start_workers(2, pool="threads", concurrency=4)
    pids = [worker.pid for worker in workers]

    asked = ask_questions(cluster, "before", QUESTIONS)
    owners = wait_for(lambda: (found := database.streaming_owners()) and len(found) == QUESTIONS and found,
                      timeout=SETTLE_SECONDS, what="every reply to stream")
    assert {int(owner.split(":")[1]) for owner in owners} == set(pids), "both workers must have turns in flight"
    time.sleep(rng.uniform(0.0, 1.0))  # the chaos: a random moment of the streams
    postgres.stop("immediate")
    time.sleep(DOWN_SECONDS)
    postgres.start()

    wait_until_settled(database)
    asked_after = ask_questions(cluster, "after", 2)
    wait_until_settled(database)
    for expected in asked + asked_after:
        assert_answered_once(database, expected)
    assert [worker.pid for worker in cluster.workers] == pids
    assert all(worker.alive for worker in cluster.workers), cluster.logs()

    chains = [database.runs(expected["agent"]) for expected in asked]
    reasons = [reason for chain in chains for (_, status, reason, _) in chain if status == "recovered"]
    chaos_counts.update({
        "postgres_restarts": 1, "turns": len(asked) + len(asked_after), "runs": database.run_count(),
        "recovered_runs": len(reasons), "turns_waited_out": sum(len(chain) == 1 for chain in chains),
        "runs_handed_over": reasons.count("database lost"),
    })
