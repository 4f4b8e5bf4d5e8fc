"""A web process stores what its sockets send in a frame process of its own (chats.frames).

Real Daphne on the test database: a message sent over the socket is stored by Daphne's child
process `hub-frames`, at the background priority; when that process dies, the next message is
stored all the same, by a new one.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import websockets.sync.client as ws_client

from chats import services as chat_services
from chats.models import Message
from tests.chaos.cluster import log_in, wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]


def frame_processes(parent: int) -> list[int]:
    """The pids of parent's children named hub-frames."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "hub-frames" and int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


def open_tab(base: str, user, chat):
    client = log_in(base, user.username)
    cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    return ws_client.connect(f"ws://{base.removeprefix('http://')}/ws/chats/{chat.pk}/", origin=base,
                             additional_headers={"Cookie": cookie})


def send_and_wait_stored(tab, content: str) -> dict:
    """Send a message as the page does; the message.created event that answers it."""
    client_id = f"c-{content}"
    tab.send(json.dumps({"type": "message.send", "content": content, "client_id": client_id}))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        event = json.loads(tab.recv(timeout=deadline - time.monotonic()))
        assert event["type"] != "error", f"the hub refused the message: {event}"
        if event["type"] == "message.created" and event["client_id"] == client_id:
            return event["message"]
    raise AssertionError(f"{content!r} was not stored within 30 s")


@pytest.mark.timeout(120)
def test_a_sent_message_is_stored_by_the_frame_process_at_background_priority(make_cluster, user):
    chat = chat_services.create_chat(owner=user, title="Notes")
    cluster = make_cluster(HUB_BACKGROUND_NICE="19")
    base = cluster.start_daphne()
    with open_tab(base, user, chat) as tab:
        stored = send_and_wait_stored(tab, "first")

    assert Message.objects.get(pk=stored["id"]).content == "first"
    (frames,) = frame_processes(cluster.daphne.pid)
    assert os.getpriority(os.PRIO_PROCESS, frames) == 19
    assert os.getpriority(os.PRIO_PROCESS, cluster.daphne.pid) == 0, "the loop that streams keeps its priority"


@pytest.mark.timeout(120)
def test_after_the_frame_process_dies_the_next_message_is_stored_by_a_new_one(make_cluster, user, chaos_counts):
    chat = chat_services.create_chat(owner=user, title="Notes")
    cluster = make_cluster()
    base = cluster.start_daphne()
    with open_tab(base, user, chat) as tab:
        send_and_wait_stored(tab, "before")
        (killed,) = frame_processes(cluster.daphne.pid)
        os.kill(killed, signal.SIGKILL)
        chaos_counts["frame_processes_killed"] += 1
        wait_for(lambda: not Path(f"/proc/{killed}").exists(), timeout=10, what="the web process to reap it")

        send_and_wait_stored(tab, "after")

    assert list(Message.objects.filter(chat=chat).values_list("content", flat=True).order_by("pk")) == \
        ["before", "after"]
    assert frame_processes(cluster.daphne.pid) not in ([], [killed])
