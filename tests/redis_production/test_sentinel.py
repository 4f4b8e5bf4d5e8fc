"""A master and a replica watched by a Sentinel: the hub finds the master through the Sentinel,
and goes on answering after the Sentinel makes the replica the master."""

import json
import time

import pytest
from websockets.exceptions import ConnectionClosed

from tests.redis_production import servers
from tests.redis_production.conftest import (
    assert_every_client_used,
    converse,
    open_tab,
    read_reply,
    running_hub,
    start_hub_expecting_failure,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]

PASSWORD = "the-masters-password"
SENTINEL_PASSWORD = "the-sentinels-own-password"
MASTER = "hubmaster"
CLOSE_RECONNECT = 4503  # chats.consumers: "reconnect and catch up"


@pytest.fixture(params=["plain", "tls"])
def group(request, tmp_path):
    """A master, a replica and a Sentinel; in the "tls" case all three speak TLS only."""
    certs = servers.make_certificates(tmp_path / "certs") if request.param == "tls" else None
    master, replica = servers.replicated_servers(tmp_path, password=PASSWORD, certs=certs)
    sentinel = servers.sentinel(tmp_path, master, name=MASTER, password=PASSWORD, own_password=SENTINEL_PASSWORD,
                                certs=certs)
    yield {"master": master, "replica": replica, "sentinel": sentinel, "certs": certs}
    for server in (sentinel, replica, master):
        server.stop()


def sentinel_env(group, *, password=PASSWORD) -> dict:
    env = {"REDIS_URL": f"redis://:{password}@{MASTER}/5",
           "HUB_REDIS_SENTINELS": f"127.0.0.1:{group['sentinel'].port}",
           "HUB_REDIS_SENTINEL_MASTER": MASTER,
           "HUB_REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD}
    if group["certs"]:
        env |= {"REDIS_URL": f"rediss://:{password}@{MASTER}/5", "HUB_REDIS_CA_FILE": str(group["certs"]["ca"]),
                "HUB_REDIS_CERT_FILE": str(group["certs"]["client_cert"]),
                "HUB_REDIS_KEY_FILE": str(group["certs"]["client_key"])}
    return env


def master_port(sentinel) -> int:
    return int(sentinel.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)[1])


def wait_for(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def replica_ready(group) -> bool:
    """The Sentinel knows the replica, and the replica has the master's data (it can be promoted)."""
    known = group["sentinel"].client().execute_command("SENTINEL", "REPLICAS", MASTER)
    info = group["replica"].client().info("replication")
    return bool(known) and info.get("master_link_status") == "up"


def test_the_hub_finds_the_master_through_the_sentinel_and_answers_after_a_failover(tmp_path, group, speaker):
    master, replica, sentinel = group["master"], group["replica"], group["sentinel"]
    with running_hub(tmp_path, sentinel_env(group)) as (base, log):
        converse(base, speaker, "puffins")
        master.client_options["db"] = 5
        assert_every_client_used(master.client())

        wait_for(lambda: replica_ready(group), "the replica never caught up with the master")
        with open_tab(base, speaker, "Open during the failover") as tab:
            tab.send(json.dumps({"type": "message.send", "content": "terns", "client_id": "c-2"}))
            assert read_reply(tab)[1]["content"].startswith("Hello terns")  # the tab hears the feed
            sentinel.client().execute_command("SENTINEL", "FAILOVER", MASTER)
            wait_for(lambda: master_port(sentinel) == replica.port, "the Sentinel never promoted the replica")
            wait_for(lambda: master.client().info("replication")["role"] == "slave",
                     "the old master never became a replica")
            # The new master is another server: the tab is told to reconnect and catch up.
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    tab.recv(timeout=20)
            assert closed.value.rcvd.code == CLOSE_RECONNECT

        converse(base, speaker, "gannets")
        replica.client_options["db"] = 5
        assert "hub-delta-feed" in {c["name"] for c in replica.client().client_list()}
    output = log.read_text(errors="replace")
    assert PASSWORD not in output and SENTINEL_PASSWORD not in output


def test_a_wrong_master_password_stops_the_start_with_one_line_that_hides_it(tmp_path, group):
    result = start_hub_expecting_failure(tmp_path, sentinel_env(group, password="not-the-password"))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"Hub cannot start: Redis at Sentinel master '{MASTER}'"), lines
    assert "refused REDIS_URL's user or password" in lines[0]
    assert "not-the-password" not in result.stderr + result.stdout
