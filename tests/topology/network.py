"""The hosts of the topology test: three network namespaces on one bridge, or loopback ports.

With namespaces, the root namespace owns a bridge with the network's first address (10.213.X.1/24),
where PostgreSQL and Redis listen; each host is a namespace with a veth on that bridge and one
address of its own (.11, .12, .13), and its processes also get a hostname of their own (a UTS
namespace), so a worker cannot tell a dead peer on another host by its pid and must notice its
silence, as on separate machines. Every name carries this pytest process's pid, so a run never
meets another's devices, and devices left by a run that was killed (its pid gone) are deleted
before new ones are made.

Without the right to make namespaces, every host is 127.0.0.1 and its processes listen on ports
of their own: the same processes and kills, on one network stack (`Network.fallback_reason` says
why, and the test reports it).
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field

from tests.chaos.cluster import Service, free_port

IP = shutil.which("ip") or "/usr/sbin/ip"
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
PREFIX = "hubt"  # hubt<pid>br (bridge), hubt<pid>a (a veth), hubt<pid>-a (a namespace): at most 15 characters
OWNED_NAME = re.compile(rf"^{PREFIX}(\d+)(?:br|-?[a-z])$")
SUBNETS = "10.213.{}."
HOST_NUMBERS = {"a": 11, "b": 12, "c": 13}
# The fallback can be asked for, to try it on a machine that has namespaces.
FORCE_LOOPBACK = "HUB_TOPOLOGY_LOOPBACK"


class NamespacesUnavailable(RuntimeError):
    pass


def ip(*args: str, check: bool = True) -> str:
    result = subprocess.run([IP, *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NamespacesUnavailable(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result.stdout


@dataclass
class Host:
    """One machine of the topology: an address, and the processes started on it."""

    name: str
    address: str
    namespace: str | None = None
    veth: str | None = None  # its end on the bridge
    hostname: str | None = None
    services: list[Service] = field(default_factory=list)

    def port(self, wanted: int) -> int:
        """A host of its own can use the same well-known port as the others; loopback cannot."""
        return wanted if self.namespace else free_port()

    def spawn(self, name: str, argv: list[str], env: dict, log_dir) -> Service:
        service = Service(f"{self.name}-{name}", [*self._enter(), *argv], env, log_dir)
        self.services.append(service)
        return service

    def _enter(self) -> list[str]:
        """The command prefix that runs a program on this host (each part execs the next, so the
        process started keeps its pid)."""
        if not self.namespace:
            return []
        prefix = [IP, "netns", "exec", self.namespace]
        if self.hostname:
            prefix += [UNSHARE, "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname]
        return prefix

    def pids(self) -> set[int]:
        """Every process running on the host: the namespace's, or the process groups started here."""
        if self.namespace:
            return {int(pid) for pid in ip("netns", "pids", self.namespace, check=False).split()}
        return {service.pid for service in self.services if service.alive}

    def kill_everything(self) -> set[int]:
        """SIGKILL every process on the host at once, as when its power goes; returns their pids."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for service in self.services:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.pid, signal.SIGKILL)  # the loopback host's pool children, if any
            service.process.wait(10)
        return pids


@dataclass
class Network:
    """Where the hosts are, and where the shared PostgreSQL and Redis listen (`server_address`)."""

    server_address: str
    subnet: str
    hosts: dict[str, Host]
    bridge: str | None = None
    fallback_reason: str = ""

    @property
    def uses_namespaces(self) -> bool:
        return self.bridge is not None

    def describe(self) -> str:
        if self.uses_namespaces:
            where = ", ".join(f"host {h.name.upper()} {h.address} ({h.namespace})" for h in self.hosts.values())
            return f"three hosts in network namespaces on bridge {self.bridge}: {where}"
        return (f"NETWORK NAMESPACES UNAVAILABLE ({self.fallback_reason}): the three hosts ran on "
                f"loopback ports of 127.0.0.1 instead")

    def stop_processes(self) -> None:
        for host in self.hosts.values():
            for service in host.services:
                service.stop()
            if host.namespace:
                host.kill_everything()

    def remove(self) -> None:
        """Delete the veths, the namespaces and the bridge. A namespace outlives its name while
        sockets of its dead processes linger, and its veth with it, so each veth goes first."""
        for host in self.hosts.values():
            if host.veth:
                ip("link", "del", host.veth, check=False)
            if host.namespace:
                ip("netns", "del", host.namespace, check=False)
        if self.bridge:
            ip("link", "del", self.bridge, check=False)


def make_network(host_names=("a", "b", "c")) -> Network:
    """Namespaces when this machine allows them; loopback otherwise (never a skip)."""
    if os.environ.get(FORCE_LOOPBACK):
        return loopback_network(host_names, f"{FORCE_LOOPBACK} is set")
    try:
        return namespace_network(host_names)
    except (NamespacesUnavailable, OSError) as error:
        return loopback_network(host_names, str(error))


def loopback_network(host_names, reason: str) -> Network:
    hosts = {name: Host(name, "127.0.0.1") for name in host_names}
    return Network("127.0.0.1", "127.0.0.1/32", hosts, fallback_reason=reason)


def namespace_network(host_names) -> Network:
    remove_leftovers()
    pid = os.getpid()
    base = SUBNETS.format(free_subnet_number())
    bridge = f"{PREFIX}{pid}br"
    hosts = {name: Host(name, base + str(HOST_NUMBERS[name]), namespace=f"{PREFIX}{pid}-{name}",
                        veth=f"{PREFIX}{pid}{name}")
             for name in host_names}
    network = Network(base + "1", base + "0/24", hosts, bridge=bridge)
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{network.server_address}/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for host in hosts.values():
            attach(host, bridge)
        give_hostnames(hosts.values(), pid)
    except BaseException:
        network.remove()
        raise
    return network


def attach(host: Host, bridge: str) -> None:
    """A namespace with lo and one veth (eth0 inside) on the bridge, holding the host's address."""
    ip("netns", "add", host.namespace)
    ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
    ip("link", "set", host.veth, "master", bridge, "up")
    ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
    ip("-n", host.namespace, "link", "set", "eth0", "up")
    ip("-n", host.namespace, "link", "set", "lo", "up")


def give_hostnames(hosts, pid: int) -> None:
    """Hostnames of their own when `unshare --uts` works here; the machine's otherwise (a worker
    then finds a dead peer by its pid rather than by its silence, and the test still holds)."""
    hosts = list(hosts)
    probe = subprocess.run([IP, "netns", "exec", hosts[0].namespace, UNSHARE, "--uts", "hostname", "probe"],
                           capture_output=True, timeout=30)
    if probe.returncode == 0:
        for host in hosts:
            host.hostname = f"hub-topology-{host.name}-{pid}"


def free_subnet_number() -> int:
    """A 10.213.X.0/24 that no interface of this machine uses (another run's bridge included)."""
    used = ip("-4", "-o", "addr", "show")
    start = os.getpid() % 254
    for offset in range(254):
        number = (start + offset) % 254 + 1
        if SUBNETS.format(number) not in used:
            return number
    raise NamespacesUnavailable("every 10.213.X.0/24 is taken")


def remove_leftovers() -> None:
    """Namespaces, veths and bridges of runs whose pytest process is gone (killed before its
    clean-up), and our own names if a dead run had our pid: their processes killed, then deleted."""
    for name in ip("netns", "list").split():
        owner = OWNED_NAME.match(name)
        if owner and not alive_other_run(int(owner.group(1))):
            for pid in ip("netns", "pids", name, check=False).split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        owner = OWNED_NAME.match(name)
        if owner and not alive_other_run(int(owner.group(1))):
            ip("link", "del", name, check=False)


def alive_other_run(pid: int) -> bool:
    return pid != os.getpid() and os.path.exists(f"/proc/{pid}")
