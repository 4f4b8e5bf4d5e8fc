"""Which processes running turns are alive, across hosts, so a dead one's turns recover at once.

A turn's lease lasts HUB_LEASE_SECONDS (30 s) and is renewed while its worker lives; the sweeper
(beat, every HUB_SWEEP_SECONDS) recovers a turn whose lease ran out. Waiting out a lease is what
a user waited for after a worker died. So every worker also keeps a liveness mark in Redis, a
score in one sorted set per process that runs turns (the worker itself, or each of its pool
children), refreshed every BEAT_SECONDS from a thread of its own, and looks at everyone else's:

* a process on this host whose pid no longer exists is gone at once;
* a process anywhere whose mark is older than HUB_PEER_SILENT_SECONDS is gone (its host died, or
  the process is frozen).

The first worker to take a gone process off the set (ZREM: exactly one succeeds) recovers the
runs it held, without waiting for their leases (agents_app.turns.recovery.recover_run with owner_gone).
A process taken for gone while it still lives (frozen longer than the silence allowed) loses its
runs as a stalled one does: their lease token changes, its writes are fenced off, and the
continuation goes on from the checkpoint.

Redis mode only: an embedded hub is one process, with nobody to watch it.
"""

import logging
import os
import socket
import threading
import time

from django.conf import settings
from django.db import connections

from agents_app.models import Run
from agents_app.turns import recovery

log = logging.getLogger(__name__)

KEY = "hub:turn-processes"
BEAT_SECONDS = 0.25


def identity(pid: int | None = None) -> str:
    """host:pid, the start of the lease owner (host:pid:thread) of every run the process holds."""
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def _client():
    return settings.HUB_REDIS.client(socket_timeout=2, socket_connect_timeout=2)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_gone(member: str, last_beat: float, *, now: float) -> bool:
    host, _, pid = member.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not pid_exists(int(pid)):
        return True
    return now - last_beat > settings.HUB_PEER_SILENT_SECONDS


def beat_once(client, own_pids) -> list[str]:
    """Mark our live processes, and take gone ones off the set; returns those this call took."""
    now = time.time()
    mine = {identity(pid): now for pid in own_pids() if pid_exists(pid)}
    pipe = client.pipeline(transaction=False)
    if mine:
        pipe.zadd(KEY, mine)
    pipe.zrange(KEY, 0, -1, withscores=True)
    members = pipe.execute()[-1]
    taken = []
    for raw, last_beat in members:
        member = raw.decode()
        if member in mine or not is_gone(member, last_beat, now=now):
            continue
        if client.zrem(KEY, member):
            taken.append(member)
    return taken


def recover_runs_of(member: str) -> int:
    """Recover every running run a gone process held; returns how many were recovered."""
    held = Run.objects.filter(status=Run.Status.RUNNING, lease_owner__startswith=member + ":")
    recovered = 0
    for run_id in held.values_list("id", flat=True):
        recovered += recovery.recover_run(run_id, reason="worker gone", owner_gone=member) is not None
    if recovered:
        log.warning("process %s is gone: recovered %s of its runs", member, recovered)
    return recovered


class Watch:
    """The thread: beat and look every BEAT_SECONDS until stopped."""

    def __init__(self, own_pids):
        self.own_pids = own_pids
        self._stop = threading.Event()
        self._thread = None

    def start(self) -> None:
        if not settings.REDIS_URL or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="hub-peer-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client = _client()
        while not self._stop.wait(BEAT_SECONDS):
            try:
                for member in beat_once(client, self.own_pids):
                    recover_runs_of(member)
            except Exception:
                # Redis or the database away for a moment: the next beat tries again, and the
                # sweeper still recovers by lease expiry.
                log.debug("peer watch: a beat failed", exc_info=True)
            finally:
                connections.close_all()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        try:
            # A worker that stops on purpose says so: nobody needs to wait for its silence.
            _client().zrem(KEY, *[identity(pid) for pid in self.own_pids()] or [identity()])
        except Exception:
            log.debug("peer watch: could not remove this worker's marks", exc_info=True)
