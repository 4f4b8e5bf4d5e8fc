"""Fixtures of the topology test: the three hosts with their processes, and a Chromium.

Which network the hosts ran on is printed at the end of every run ("topology" section) and, when
namespaces could not be made, is also a warning in the test report: the loopback run is never
mistaken for the real one.
"""

import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.chaos.cluster import BIN, ROOT
from tests.conftest import require_service
from tests.topology import conversation
from tests.topology.balancer import HAPROXY, Balancer
from tests.topology.network import Host, Network, make_network
from tests.topology.processes import Web, Worker, hub_env, start_beat
from tests.topology.stores import NetworkPostgres, NetworkRedis

NETWORKS_USED: list[str] = []
WEB_PORTS = {"web1": 8001, "web2": 8002}


class TopologyFallback(UserWarning):
    """The hosts ran on loopback ports because network namespaces could not be made."""


@dataclass
class Topology:
    network: Network
    env: dict
    log_dir: Path
    records: conversation.Records
    webs: dict[str, Web]
    balancer: Balancer
    workers: list[Worker] = field(default_factory=list)

    def host(self, name: str) -> Host:
        return self.network.hosts[name]

    def workers_on(self, host_name: str) -> list[Worker]:
        return [worker for worker in self.workers if worker.host.name == host_name]

    def host_running(self, pid: int | None) -> str | None:
        """Which host a process runs on, from the pid in a run's lease owner."""
        return next((w.host.name for w in self.workers if w.pid == pid), None)


def pytest_terminal_summary(terminalreporter):
    if NETWORKS_USED:
        terminalreporter.section("topology")
        for line in NETWORKS_USED:
            terminalreporter.write_line(line)


@pytest.fixture
def network():
    """The hosts; namespaces and bridge deleted after the test, whatever happened in it."""
    from tests.e2e.conftest import CHROMIUM

    # Checked before anything starts: skipped without them locally, a failure in CI.
    require_service("HAProxy", os.path.exists(HAPROXY), "apt-get install haproxy")
    require_service("Chromium", os.path.exists(CHROMIUM), "apt-get install chromium")
    made = make_network()
    NETWORKS_USED.append(f"topology: {made.describe()}")
    if not made.uses_namespaces:
        warnings.warn(TopologyFallback(made.describe()), stacklevel=1)
    try:
        yield made
    finally:
        made.stop_processes()
        made.remove()


@pytest.fixture
def stores(network, tmp_path):
    """The one PostgreSQL and Redis of all hosts, on the network's address; yields their URLs."""
    redis = NetworkRedis(tmp_path, network.server_address).start()
    try:
        with NetworkPostgres(network.server_address, network.subnet) as postgres:
            yield {"database_url": postgres.create_database("hub"), "redis_url": redis.url()}
    finally:
        redis.stop()


@pytest.fixture
def topology(network, stores, tmp_path, request):
    """Host A: web 1 and web 2 behind HAProxy; host B: two workers, standing by (they take no
    turn until the test says); host C: a worker and beat. Yields a Topology once every process
    answers."""
    host_a, host_c = network.hosts["a"], network.hosts["c"]
    env = hub_env(tmp_path, database_url=stores["database_url"], redis_url=stores["redis_url"],
                  allowed_hosts=f"{host_a.address},127.0.0.1,localhost")
    migration = Migration(env)
    try:
        # The web processes need no table to start: they boot while the schema is made.
        webs = {name: Web(host_a, name, host_a.port(port), env, tmp_path) for name, port in WEB_PORTS.items()}
        ids = migration.ids()
        start_beat(host_c, env, tmp_path)
        workers = [Worker(host_c, "worker-1", env, tmp_path),
                   *(Worker(network.hosts["b"], f"worker-{n}", env, tmp_path, standing_by=True) for n in (2, 3))]
        for web in webs.values():
            web.wait_until_serving()
        balancer = Balancer(host_a, {name: web.port for name, web in webs.items()}, tmp_path)
        balancer.wait_until_up(*webs)
        for worker in workers:
            worker.wait_until_ready()
        yield Topology(network, env, tmp_path, conversation.Records(stores["database_url"], ids), webs, balancer,
                       workers=workers)
    finally:
        migration.stop()
        network.stop_processes()  # before the database and Redis go, so nothing writes to them dying
        if getattr(request.node, "rep_call", None) is None or request.node.rep_call.failed:
            sys.__stderr__.write(f"\nprocess logs of {request.node.name}:\n{process_logs(network)}\n")


class Migration:
    """One Django start, in a process of its own, for the schema and then the conversation."""

    CODE = ("from django.core.management import call_command; "
            "call_command('migrate', interactive=False, verbosity=0); "
            "from tests.topology.conversation import make; make()")

    def __init__(self, env: dict):
        self.process = subprocess.Popen([str(BIN / "python"), "manage.py", "shell", "-c", self.CODE], cwd=ROOT,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ids(self) -> dict:
        """The conversation's ids, once the schema and the conversation are made."""
        out, err = self.process.communicate(timeout=180)
        if self.process.returncode != 0:
            raise AssertionError(f"migrate and the conversation failed:\n{err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def process_logs(network: Network) -> str:
    services = [s for host in network.hosts.values() for s in host.services]
    return "\n\n".join(f"--- {s.name} (pid {s.pid}) ---\n{s.log_tail()}" for s in services)


@pytest.fixture
def chromium():
    """Debian's Chromium, as tests/e2e drives it, in this (the root) namespace: it reaches host A
    over the bridge."""
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
