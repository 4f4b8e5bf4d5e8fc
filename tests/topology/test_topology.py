"""The production layout on three hosts: a reply streams on while its web process and then its
worker's whole host die.

Hosts (tests/topology/network.py): three network namespaces on a bridge, each with one address
and a hostname of its own. Host A runs web 1 and web 2 (Daphne) behind HAProxy; host B runs two
workers, which consume no turn until the reply has started on host C; host C runs a worker and
beat. The one PostgreSQL and Redis listen on the bridge's own address in the root namespace.
Where namespaces cannot be made, the same processes run on loopback ports and the run says so
(conftest.py).

The tab is a real Chromium page, driven by Playwright as in tests/e2e: Chromium runs in the root
namespace, which reaches host A's balancer over the bridge, so the page's own code
(static/js/net.js) does the reconnect and the catch-up, and what is checked is what a person
would read. The agent is the offline scripted model (agents_app.scripted): each worker host runs
it itself, and a continuation after a recovery streams exactly the rest of the reply, so the
text the tab must end with is known.

What happens, and what must hold:

1. The tab logs in through the balancer and opens the chat: HAProxy (`balance first`) puts its
   websocket on web 1. The message it sends is taken by host C's worker, the only one consuming
   the queue of turns; then host B's workers join that queue.
2. Mid-reply web 1 is SIGKILLed: HAProxy takes it out, the page reconnects through the balancer
   to web 2, and the reply keeps streaming into it.
3. Then every process of host C (its worker and beat) is SIGKILLed at once. A worker of host B
   finds host C's worker gone (its liveness mark silent), recovers the turn and streams the rest.
4. The page ends with exactly the scripted reply, and showed nothing but ever longer beginnings of
   it on the way (no gap, no repeat); the database holds one final reply with that text; the run
   on host C was recovered and a run on host B finished it.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.chaos.cluster import wait_for
from tests.e2e.conftest import ConsoleWatch
from tests.e2e.helpers import send
from tests.topology import conversation

pytestmark = [
    pytest.mark.needs_redis,  # in `make test`, never in `make test-embedded`
    pytest.mark.needs_postgres,
    pytest.mark.alone,  # it kills processes and makes network devices: nothing may run beside it
    pytest.mark.chaos,
]

# What Chromium logs while web 1 is gone and before the balancer has noticed (the fault made here).
REFUSED = (r"WebSocket connection to .* failed"
           r"|Failed to load resource: net::ERR_(SOCKET_NOT_CONNECTED|CONNECTION_\w+|EMPTY_RESPONSE)"
           r"|Failed to load resource: the server responded with a status of 50[23]")
# Chromium ignores the hub's Cross-Origin-Opener-Policy on plain HTTP at an address other than
# localhost, and says so as an error: the price of a real network address without TLS.
UNTRUSTWORTHY_ORIGIN = r"The Cross-Origin-Opener-Policy header has been ignored"
# Records every text the reply shows, at each change of the page, for the no-gap-no-repeat check.
WATCH_REPLY = """(id) => {
  window.replyTexts = [];
  const read = () => {
    const shown = document.querySelector(`li[data-message-id="${id}"] .msg-content`);
    const texts = window.replyTexts;
    if (shown && shown.innerText !== texts[texts.length - 1]) texts.push(shown.innerText);
  };
  new MutationObserver(read).observe(document.body, { subtree: true, childList: true, characterData: true });
  read();
}"""


@pytest.mark.timeout(180)
def test_a_reply_survives_its_web_process_and_its_worker_host(topology, chromium):
    expected = conversation.expected_reply()
    console = ConsoleWatch()
    console.allow(REFUSED)
    console.allow(UNTRUSTWORTHY_ORIGIN)
    page = open_chat(chromium, topology, console)
    wait_for(lambda: connections(topology, "web1") >= 1, timeout=10, what="the tab's socket on web 1")

    send(page, conversation.PROMPT)
    first_run = wait_for(topology.records.streaming_run, timeout=30, what="a worker to take the turn")
    assert topology.host_running(first_run.owner_pid) == "c", first_run.lease_owner
    for worker in topology.workers_on("b"):
        worker.take_turns()  # from now on host B's workers take turns too: any recovered one
    reply = page.locator(f'li[data-message-id="{first_run.reply_message_id}"]')
    page.evaluate(WATCH_REPLY, first_run.reply_message_id)

    kill_web1_mid_stream(topology, reply, expected)
    kill_host_c_mid_stream(topology, reply, expected)

    expect(reply).to_have_class(re.compile("status-final"), timeout=60_000)
    assert reply.locator(".msg-content").inner_text().strip() == expected.strip()
    expect(page.locator(f'li[data-message-id="{first_run.reply_message_id}"]')).to_have_count(1)
    assert_only_beginnings_shown(page.evaluate("window.replyTexts"), expected)
    assert_recovered_on_host_b(topology, expected)
    assert console.unexpected() == [], f"errors in the browser console: {console.unexpected()}"


def open_chat(chromium, topology, console):
    """Log in through the balancer as a person does, landing on the chat page, connected."""
    context = chromium.new_context(viewport={"width": 1280, "height": 820})
    page = context.new_page()
    page.set_default_timeout(15_000)
    console.attach(page, "tab")
    page.goto(f"{topology.balancer.base}/login/?next=/chats/{topology.records.chat_id}/")
    page.locator("input[name=username]").fill(conversation.USERNAME)
    page.locator("input[name=password]").fill(conversation.PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector("body.js-ready")
    expect(page.locator(".conn-status")).to_be_empty()  # the chat's socket is open
    return page


def connections(topology, web: str) -> int:
    return topology.balancer.servers()[web]["current"]


def shown_length(reply) -> int:
    return len(reply.locator(".msg-content").inner_text()) if reply.count() else 0


def wait_until_shown(reply, length: int, what: str) -> None:
    wait_for(lambda: shown_length(reply) >= length, timeout=30, what=what)


def kill_web1_mid_stream(topology, reply, expected: str) -> None:
    """SIGKILL web 1 with the reply an eighth shown; the tab must come back through web 2."""
    wait_until_shown(reply, len(expected) // 8, "the reply to stream into the tab through web 1")
    assert topology.balancer.servers()["web2"]["total"] == 0, "web 2 served the tab before web 1 died"
    topology.webs["web1"].service.sigkill()
    shown_at_kill = shown_length(reply)
    assert shown_at_kill < len(expected), "the reply ended before web 1 was killed"
    wait_for(lambda: topology.balancer.servers()["web1"]["status"].startswith("DOWN"), timeout=10,
             what="haproxy to take web 1 out")
    wait_for(lambda: connections(topology, "web2") >= 1, timeout=15,
             what="the tab to reconnect through the balancer to web 2")
    expect(reply.page.locator(".conn-status")).to_be_empty()  # the page says it is connected again
    # Streaming on through web 2: more than the catch-up of what the worker streamed meanwhile.
    wait_until_shown(reply, shown_at_kill + 40, "the reply to stream on through web 2")


def kill_host_c_mid_stream(topology, reply, expected: str) -> None:
    """SIGKILL every process of host C while its worker still streams the reply."""
    running = topology.records.streaming_run()
    assert running is not None and topology.host_running(running.owner_pid) == "c", (
        "the reply must still be streaming from host C when host C dies; runs: "
        f"{topology.records.runs()}")
    killed = topology.host("c").kill_everything()
    assert {worker.pid for worker in topology.workers_on("c")} <= killed
    assert shown_length(reply) < len(expected), "the reply ended before host C was killed"
    wait_for(lambda: not topology.host("c").pids(), timeout=10, what="every process of host C to be gone")


def assert_only_beginnings_shown(texts: list[str], expected: str) -> None:
    """Every text the reply showed was a beginning of the full reply: nothing skipped or doubled."""
    assert len(texts) > 10, texts  # it streamed, piece by piece
    wrong = [text for text in texts if not expected.startswith(text.strip())]
    assert not wrong, f"the tab showed text that is not a beginning of the reply: {wrong[:3]}"


def assert_recovered_on_host_b(topology, expected: str) -> None:
    """One final reply with the full text; host C's run recovered, a run on host B finished it."""
    records = topology.records
    wait_for(lambda: records.unfinished_runs() == 0, timeout=30, what="every run to end")
    assert [(status, content) for _, status, content in records.replies()] == [("final", expected)]
    runs = records.runs()
    hosts = [(run.kind, run.status, topology.host_running(run.owner_pid)) for run in runs]
    assert hosts[0] == ("reply", "recovered", "c"), hosts
    assert hosts[-1][1:] == ("succeeded", "b"), hosts
    assert all(status == "recovered" and host == "c" for _, status, host in hosts[:-1]), hosts
