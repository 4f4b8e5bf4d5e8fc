"""SIGKILL Redis mid-stream and start it again: the hub carries on as if nothing had happened.

Two Celery workers (threads pool), beat and Daphne run on the test database and on a Redis of
the test's own (tests.chaos.redis_server; no persistence, so the restart loses every key: the
broker's queue and unacked set, the channel layer's groups, the replay buffers, the cache). Four
turns stream on the two workers, with a websocket tab on one chat and an SSE client on one run;
Redis is SIGKILLed in the middle of the replies and started again 1.5 s later. Afterwards every
question has exactly one final reply with the uninterrupted text, no run is left queued or
running, no turn was taken from a live worker, both workers are the same live processes, and both
clients got the whole text with no gap and no repeat. Then Redis restarts again while a turn's
task waits in the broker's queue: the task is lost, and the turn is sent again within seconds.
"""

import json
import threading
import time

import httpx
import pytest
import redis
import websockets.sync.client as ws_client
from celery import Celery
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError
from websockets.exceptions import ConnectionClosed

from agents_app.models import Run
from chats.models import Message
from hub.services import create_api_token
from tests.api.sse_client import read_events
from tests.chaos import scenarios
from tests.chaos.cluster import Cluster, wait_for
from tests.chaos.redis_server import RedisServer

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

TURNS = 4
# Each worker takes at most CONCURRENCY tasks at once, so both run turns; and at least one still
# waits on the broker for more (a BRPOP in flight), the state in which celery 5.7.0's worker died
# of a Redis restart (docs/decisions.md).
CONCURRENCY = 3
REPLY = ("Reply to {prompt}: Redis went away in the middle of this sentence and came back empty, "
         "and still every word arrives once, in its place, with nothing lost and nothing said twice. "
         "The tab that watched it was told to reconnect, got the text so far in one piece, then the "
         "rest as it was written, and the program on the event stream never noticed a thing.")
SCRIPT = scenarios.script(REPLY, delay=0.05)  # ~60 characters a second: ~6 s a reply
DOWN_SECONDS = 1.5
PASSWORD = "pass-for-tests-1"
CLOSE_RECONNECT = 4503


class PrivateRedisCluster(Cluster):
    """A Cluster whose processes use the test's own Redis; workers are pinged there too."""

    def __init__(self, log_dir, redis: RedisServer):
        # The production lease: a lost task must not wait for the 2 x lease re-send (60 s).
        super().__init__(log_dir, REDIS_URL=redis.url(), HUB_API_SEND_RATE="10000/min", HUB_LEASE_SECONDS="30")
        self.probe = Celery("redis-restart-probe", broker=redis.url(), set_as_current=False)

    def start_workers(self, count=1, *, pool="threads", concurrency=4):
        started = [self._spawn_worker(pool, concurrency) for _ in range(count)]
        for worker in started:
            wait_for(lambda w=worker: self.answers_ping(w), timeout=60, what=f"{worker.name} to answer a ping",
                     every=0.2)
        return started

    def answers_ping(self, worker) -> bool:
        if not worker.alive:
            raise AssertionError(f"{worker.name} exited with {worker.process.returncode}:\n{worker.log_tail()}")
        try:
            return bool(self.probe.control.ping(destination=[worker.hostname], timeout=0.5))
        except (OSError, KombuOperationalError, RedisError):
            return False  # the probe's own connection died with Redis; the next ping takes a new one


@pytest.fixture
def cluster(transactional_db, tmp_path, redis_server, request):
    cluster = PrivateRedisCluster(tmp_path, redis_server)
    yield cluster
    cluster.shutdown()
    cluster.probe.close()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        import sys

        sys.__stderr__.write(f"\nprocess logs:\n{cluster.logs()}\n\nredis:\n{redis_server.log_tail()}\n")


def log_in(base: str, username: str) -> str:
    """The session cookie of a user logged in through the log-in page, as a browser holds it."""
    with httpx.Client(base_url=base, timeout=10) as client:
        client.get("/login/")
        form = {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]}
        response = client.post("/login/", data=form, headers={"Referer": f"{base}/login/"})
        assert response.status_code == 302, response.text
        return "; ".join(f"{k}={v}" for k, v in client.cookies.items())


class TimedLines:
    """A streaming response whose lines (comments too) are noted with when they arrived."""

    def __init__(self, response, times: list[float]):
        self.response, self.times = response, times

    def iter_lines(self):
        for line in self.response.iter_lines():
            self.times.append(time.monotonic())
            yield line


class SseFollower(threading.Thread):
    """A program following one run's events, resuming with Last-Event-ID whenever its stream
    ends early; notes when each line (keepalives too) arrived."""

    def __init__(self, base: str, token: str, run_id: str):
        super().__init__(daemon=True)
        self.url = f"{base}/api/v1/runs/{run_id}/events"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.events = []
        self.errors = []
        self.connections = 0
        self.line_times: list[float] = []
        self.done = threading.Event()

    def run(self):
        last_id = None
        with httpx.Client(timeout=httpx.Timeout(10, read=30)) as client:
            while not self.done.is_set():
                headers = {**self.headers, **({"Last-Event-ID": last_id} if last_id else {})}
                self.connections += 1
                try:
                    with client.stream("GET", self.url, headers=headers) as response:
                        for event in read_events(TimedLines(response, self.line_times)):
                            if event.type == "error":
                                self.errors.append(event.data)
                                break
                            self.events.append(event)
                            last_id = event.id or last_id
                            if event.type == "end":
                                self.done.set()
                                return
                except httpx.HTTPError as exc:
                    self.errors.append(repr(exc))
                time.sleep(0.5)

    def text(self) -> str:
        """The deltas joined, each starting exactly where the last ended (no gap, no repeat)."""
        text = ""
        for event in self.events:
            if event.type == "message.delta" and event.data["part"] == "text":
                assert event.data["offset"] == len(text), ("gap or repeat", event.data["offset"], len(text))
                text += event.data["text"]
        return text


class WebsocketTab(threading.Thread):
    """A chat page's socket: applies deltas as static/js/chatmodel.js does, reconnects when the
    server closes (as static/js/net.js does on any code but 4404/4410) and then, like the page's
    catch-up, reads the reply from the API if it settled meanwhile."""

    def __init__(self, base: str, cookie: str, token: str, chat_id):
        super().__init__(daemon=True)
        self.ws_url = f"ws://{base.removeprefix('http://')}/ws/chats/{chat_id}/"
        self.base, self.cookie, self.token, self.chat_id = base, cookie, token, chat_id
        self.text: dict[int, str] = {}
        self.settled: dict[int, str] = {}
        self.gaps: list = []
        self.clashes: list = []
        self.close_codes: list[int] = []
        self.connected = threading.Event()
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                with ws_client.connect(self.ws_url, origin=self.base, additional_headers={"Cookie": self.cookie},
                                       max_queue=None, open_timeout=10) as connection:
                    if self.connected.is_set():
                        self.catch_up()
                    self.connected.set()
                    while not self.stop.is_set():
                        try:
                            self.apply(json.loads(connection.recv(timeout=0.5)))
                        except TimeoutError:
                            continue
            except ConnectionClosed as closed:
                self.close_codes.append(closed.rcvd.code if closed.rcvd else None)
            except (OSError, TimeoutError) as exc:  # refused while the hub cannot take it
                self.close_codes.append(repr(exc))
            time.sleep(0.3)

    def apply(self, event: dict) -> None:
        if event["type"] == "message.delta" and event["part"] == "text":
            message_id, offset = event["message_id"], event["offset"]
            held = self.text.get(message_id, "")
            if offset > len(held):
                self.gaps.append((message_id, offset, len(held)))
                return
            if held[offset:offset + len(event["text"])] != event["text"][:len(held) - offset]:
                self.clashes.append((message_id, offset))  # text it already had, but different
            self.text[message_id] = held + event["text"][len(held) - offset:]
        elif event["type"] == "message.settled" and event["message"]["status"] != "streaming":
            self.settled[event["message"]["id"]] = event["message"]["content"]

    def catch_up(self) -> None:
        """What the page fetches after a reconnect: replies that settled while it was away."""
        with httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}) as client:
            page = client.get(f"/api/v1/chats/{self.chat_id}/messages/").json()["results"]
        for message in page:
            if message["kind"] == "message" and message["sender"]["type"] == "agent" and message["status"] == "final":
                self.settled[message["id"]] = message["content"]


def send_question(base: str, token: str, chat_id, prompt: str) -> str:
    response = httpx.post(f"{base}/api/v1/chats/{chat_id}/messages/", json={"content": prompt},
                          headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["runs"][0]["id"]


def assert_answered_once(agent, prompt: str) -> None:
    replies = list(Message.objects.filter(chat=agent.main_chat, sender_agent=agent, kind="message"))
    assert len(replies) == 1, f"{agent.name} left {len(replies)} replies"
    assert replies[0].status == Message.Status.FINAL, (replies[0].status, scenarios.runs_of(agent))
    assert replies[0].content == REPLY.replace("{prompt}", prompt), scenarios.runs_of(agent)


@pytest.mark.timeout(150)
def test_a_redis_restart_mid_stream_loses_no_turn_no_word_and_no_worker(cluster, redis_server, user,
                                                                         chaos_counts):
    cluster.start_beat()
    workers = cluster.start_workers(2, pool="threads", concurrency=CONCURRENCY)
    pids = [w.pid for w in workers]
    base = cluster.start_daphne()
    token = create_api_token(user=user, name="chaos")[1]
    agents = [scenarios.make_agent(user, f"Steady{n}", SCRIPT) for n in range(TURNS)]
    prompts = [f"question {n}" for n in range(TURNS)]

    tab = WebsocketTab(base, log_in(base, user.username), token, agents[0].main_chat.pk)
    tab.start()
    assert tab.connected.wait(30), "the tab could not connect"
    run_ids = [send_question(base, token, agent.main_chat.pk, prompt)
               for agent, prompt in zip(agents, prompts, strict=True)]
    sse = SseFollower(base, token, run_ids[1])
    sse.start()

    # Every turn streams, on both workers; then Redis dies in the middle of the replies.
    def streaming_on_both_workers():
        running = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING, reply_message__isnull=False)
        owners = {cluster.worker_running(run) for run in running}
        return len(running) == TURNS and owners == set(workers)

    wait_for(streaming_on_both_workers, timeout=60, what="every turn to stream, on both workers")
    wait_for(lambda: len(tab.text) == 1 and len(sse.text()) > 20, timeout=30, what="the clients to get some text")
    time.sleep(0.5)
    redis_server.restart_after(DOWN_SECONDS)
    chaos_counts["redis_restarts"] += 1

    scenarios.wait_until_settled(timeout=60)
    for agent, prompt in zip(agents, prompts, strict=True):
        assert_answered_once(agent, prompt)
    scenarios.assert_no_run_left_behind()
    assert [w.pid for w in cluster.live_workers()] == pids, "a worker died with Redis"
    scenarios.assert_runs_lost_only_with_their_worker(killed_pids=set())  # nobody took a live turn
    for worker in workers:
        wait_for(lambda w=worker: cluster.answers_ping(w), timeout=30, what=f"{worker.name} to answer again")

    # Both clients followed their reply through the restart: all of it, once, no hole.
    assert sse.done.wait(30), f"the SSE client never got `end`: {sse.errors}"
    assert sse.text() == REPLY.replace("{prompt}", prompts[1])
    silences = [b - a for a, b in zip(sse.line_times, sse.line_times[1:], strict=False)]
    assert max(silences) < 5, f"the event stream went silent for {max(silences):.1f} s"
    reply_id = Message.objects.get(chat=agents[0].main_chat, sender_agent=agents[0], kind="message").pk
    wait_for(lambda: reply_id in tab.settled, timeout=30, what="the tab to see the reply settle")
    tab.stop.set()
    tab.join(5)
    assert not tab.gaps, f"the tab saw offsets jump: {tab.gaps}"
    assert not tab.clashes, f"the tab was sent text that differs from what it had: {tab.clashes}"
    assert tab.settled[reply_id] == REPLY.replace("{prompt}", prompts[0])
    # The reply streams on for seconds after Redis is back: the reconnected tab got the snapshot
    # and the live tail to the last word.
    assert tab.text[reply_id] == tab.settled[reply_id], "the streamed text differs from the stored reply"
    assert CLOSE_RECONNECT in tab.close_codes, f"the tab was never told to reconnect: {tab.close_codes}"

    # New turns: more than both workers can take, so one waits with its task in the broker's
    # queue when Redis restarts again. The restart loses that task; the sweeper sends it again at
    # once (not after twice the 30 s lease), and it starts as soon as a worker has room.
    late = [scenarios.make_agent(user, f"Later{n}", SCRIPT) for n in range(2 * CONCURRENCY + 1)]
    late_runs = [send_question(base, token, agent.main_chat.pk, "after the restart") for agent in late]
    broker = redis.Redis.from_url(redis_server.url())

    def one_waits_in_the_queue():
        waiting = Run.objects.filter(pk__in=late_runs, status=Run.Status.QUEUED).first()
        return waiting if waiting is not None and broker.llen("celery") else None

    waiting = wait_for(one_waits_in_the_queue, timeout=30, what="a turn to wait in the broker's queue")
    time.sleep(0.5)
    assert Run.objects.get(pk=waiting.pk).status == Run.Status.QUEUED, "no worker had room: it must wait"
    broker.close()
    redis_server.restart_after(DOWN_SECONDS)
    chaos_counts["redis_restarts"] += 1
    wait_for(lambda: Run.objects.filter(pk=waiting.pk).exclude(status=Run.Status.QUEUED).exists(), timeout=20,
             what="the turn whose task Redis lost to be taken again")
    scenarios.wait_until_settled(timeout=60)
    for agent in late:
        assert_answered_once(agent, "after the restart")
    scenarios.assert_no_run_left_behind()
    assert [w.pid for w in cluster.live_workers()] == pids, "a worker died with Redis"
    scenarios.assert_runs_lost_only_with_their_worker(killed_pids=set())

    chaos_counts.update({"turns": TURNS + len(late), "sse_reconnects": sse.connections - 1,
                         "tab_reconnects": len(tab.close_codes)})
