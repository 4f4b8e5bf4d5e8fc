"""hub_repair: every check of the hub, in the order their fixes should run.

The workers first: with none alive, or runs waiting in the queue, nothing here can help (those
checks have no fix; they say what to do). Then turns: recovering a run settles its reply, so the
stuck-stream check after it only finds replies no run will ever finish. Then chats (members,
summaries) and the search index.

    from agents_app.repair import run_repair
    report = run_repair(fix=False)   # a dry run: reads only
    print(report.as_table())
"""

from agents_app.repair import selectors, services
from chats import repair as chat_repair
from hub.repair import Check, Report, run_checks

CHECKS = [
    Check("no_live_worker", "A live worker", selectors.find_no_live_worker, None,
          "No worker has a fresh heartbeat while runs wait for one, or since one went silent (killed, or its host "
          "went away): nothing will answer. The hub cannot start one itself."),
    Check("waiting_runs", "Runs waiting in the queue", selectors.find_waiting_runs, None,
          "Runs queued longer than HUB_QUEUED_WARNING_SECONDS: no worker is alive, the workers are all busy, or "
          "they do not read the hub's queue. Runs are never lost while they wait."),
    Check("expired_leases", "Runs running past their lease", selectors.find_expired_leases,
          lambda f: services.recover_lost_run(run=f.target),
          "A worker took the run and stopped answering (killed, or its host went away). Beat's sweeper "
          "recovers these within seconds; finding some here means beat is not running or cannot keep up."),
    Check("undispatched_runs", "Runs never sent to a worker", selectors.find_undispatched_runs,
          lambda f: services.send_again(run=f.target),
          "The process that queued the run stopped between storing it and sending its task to the workers."),
    Check("stuck_streams", "Streaming messages with no live run", selectors.find_stuck_streams,
          lambda f: services.settle_stuck_message(message=f.target),
          "A reply the chat shows as still being written, but no queued or running run will ever finish it."),
    Check("deleted_agent_memberships", "Memberships of deleted agents", selectors.find_deleted_agent_memberships,
          lambda f: services.remove_deleted_agent_membership(membership=f.target),
          "A deleted agent still listed as a member of a chat."),
    *chat_repair.CHECKS,
]
CHECK_KEYS = [c.key for c in CHECKS]


def run_repair(*, fix: bool = False, only=None, on_fixed=None) -> Report:
    """Run every check (or those named in only); with fix, repair what they find."""
    chosen = [c for c in CHECKS if not only or c.key in only]
    return run_checks(chosen, fix=fix, on_fixed=on_fixed)
