"""A tab whose live deltas were lost still shows the exact text, without a gap or a repeat.

Deltas reach the web process through one Redis subscription (chats.deltafeed). The test freezes
Daphne (SIGSTOP) while eight replies stream into the chat and, while it is frozen, has Redis cut
its subscription (as Redis does to a subscriber that falls too far behind): every
delta published until the feed resubscribes is lost. Thawed, the feed reconnects, the sockets see
offsets jump and fill the holes from the replay buffer, so the tab never sees a gap. Then the tab
reconnects: the snapshot and the live tail again end in exactly the text in the database.
"""

import json
import os
import signal
import time

import httpx
import pytest
import redis
import websockets.sync.client as ws_client
from django.conf import settings

from chats import services as chat_services
from chats.deltafeed import CLIENT_NAME
from chats.models import Message
from chats.streams import replay_buffer
from tests.chaos import scenarios
from tests.chaos.cluster import wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

AGENTS = 8
LONG_REPLY = "Streaming on while the web process is frozen solid; every word still counts. " * 24
PASSWORD = "pass-for-tests-1"


def log_in(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, follow_redirects=False, timeout=10)
    client.get("/login/")
    form = {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]}
    response = client.post("/login/", data=form, headers={"Referer": f"{base}/login/"})
    assert response.status_code == 302, response.text
    return client


class Tab:
    """A chat page's view of streaming replies, applying deltas as static/js/chat.js does."""

    def __init__(self, ws_url: str, base: str, cookie: str):
        self.ws_url, self.base, self.cookie = ws_url, base, cookie
        self.text: dict[int, str] = {}
        self.settled: dict[int, str] = {}
        self.gaps: set[int] = set()
        self.connection = None
        self.spans: dict[int, list[tuple[int, int]]] = {}  # this connection's deltas: (offset, end)

    def connect(self) -> None:
        self.connection = ws_client.connect(self.ws_url, origin=self.base,
                                            additional_headers={"Cookie": self.cookie}, max_queue=None)
        self.spans = {}

    def close(self) -> None:
        self.connection.close()

    def apply(self, event: dict) -> None:
        if event["type"] == "message.delta" and event["part"] == "text":
            message_id, offset = event["message_id"], event["offset"]
            self.spans.setdefault(message_id, []).append((offset, offset + len(event["text"])))
            have = len(self.text.get(message_id, ""))
            if offset > have:
                self.gaps.add(message_id)  # the page would refetch here; it keeps what it has
                return
            self.text[message_id] = self.text.get(message_id, "") + event["text"][have - offset:]
        elif event["type"] == "message.settled" and event["message"]["status"] != "streaming":
            self.settled[event["message"]["id"]] = event["message"]["content"]

    def read_until(self, predicate, *, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            try:
                self.apply(json.loads(self.connection.recv(timeout=min(left, 1.0))))
            except TimeoutError:
                continue


@pytest.mark.timeout(180)
def test_a_tab_whose_live_deltas_were_lost_still_shows_the_exact_text(make_cluster, user, chaos_counts):
    agent_script = {"reply": LONG_REPLY, "chunk": 2, "delay": 0.02, "tools": []}  # ~20 deltas a second each
    chat = chat_services.create_chat(owner=user, title="Firehose", agents=[
        scenarios.make_agent(user, f"Streamer{n}", agent_script) for n in range(AGENTS)])
    cluster = make_cluster()
    cluster.start_workers(2, pool="threads", concurrency=AGENTS // 2)
    base = cluster.start_daphne()
    client = log_in(base, user.username)
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    tab = Tab(f"ws://{base.removeprefix('http://')}/ws/chats/{chat.pk}/", base, cookie)
    tab.connect()
    tab.connection.send(json.dumps({"type": "message.send", "content": "go", "client_id": "c-1"}))
    tab.read_until(lambda: len(tab.text) == AGENTS, timeout=60, what="every reply to start streaming")
    reply_ids = sorted(tab.text)

    broker = redis.Redis.from_url(settings.REDIS_URL)
    os.kill(cluster.daphne.pid, signal.SIGSTOP)
    try:
        feeds = [c for c in broker.client_list(_type="pubsub") if c.get("name") == CLIENT_NAME]
        assert feeds, "the frozen web process had no delta subscription to cut"
        killed = sum(broker.client_kill_filter(_id=c["id"]) for c in feeds)
        streamed = {i: len(replay_buffer().read(i)["text"]) for i in reply_ids}
        wait_for(lambda: all(len(replay_buffer().read(i)["text"]) > streamed[i] + 20 for i in reply_ids),
                 timeout=30, what="more text to stream while the subscription is gone")
        lost = sum(len(replay_buffer().read(i)["text"]) - streamed[i] for i in reply_ids)
    finally:
        os.kill(cluster.daphne.pid, signal.SIGCONT)
    chaos_counts["subscriptions_cut"] = killed
    chaos_counts["chars_streamed_unheard"] = lost

    # Thawed: the tab goes on past the lost stretch with no hole (the socket filled it).
    tab.read_until(lambda: all(len(tab.text[i]) > streamed[i] + 20 for i in reply_ids), timeout=60,
                   what="the tab to get past the stretch whose deltas were lost")
    assert not tab.gaps, "the tab saw an offset jump: a hole the socket should have filled"
    tab.close()
    tab.connect()  # the reconnect: the snapshot first, then the live tail
    tab.read_until(lambda: set(tab.settled) >= set(reply_ids), timeout=90, what="every reply to settle")
    tab.close()

    for reply_id in reply_ids:
        reply = Message.objects.get(pk=reply_id)
        assert reply.status == "final" and reply.content == LONG_REPLY
        assert tab.text[reply_id] == reply.content, f"reply {reply_id}: the tab's text differs from the database"
        spans = tab.spans[reply_id]
        assert spans[0][0] == 0, "a reply still streaming starts with its snapshot at offset 0"
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), "gap or repeat after reconnecting"
