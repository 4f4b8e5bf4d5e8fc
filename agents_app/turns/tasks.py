"""Celery tasks: thin — load by id, call the service. The top of agents_app.turns: they call down.

Their names are the ones queued messages and beat's schedule carry ("agents_app.run_turn" and so
on, from before the tasks moved into this package): they never change. Workers import this module
through CELERY_IMPORTS (hub.settings); the modules below send the tasks by name.
"""

import threading

from celery import shared_task
from celery.signals import task_prerun, worker_ready
from django.conf import settings

from agents_app import titles
from agents_app.turns import execution, recovery
from agents_app.turns.modelloop import model_loop
from agents_app.turns.runs import RUN_TURN_TASK
from hub.startup import yield_to_streams


@shared_task(name=RUN_TURN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_turn(run_id: str) -> str:
    return execution.execute_run(run_id)


@task_prerun.connect
def run_tasks_below_the_model_loop(task=None, **kwargs):
    """Task threads (a turn's start, checkpoints and end; titles; sweeps) yield the CPU to the
    model loop that streams (hub.startup.yield_to_streams). The loop is started first if need be:
    a thread inherits the priority of the thread that starts it. An eager task runs in its
    caller's thread, which is left alone."""
    if task is not None and not task.request.is_eager:
        model_loop()
        yield_to_streams()


@shared_task(name="agents_app.sweep_runs", ignore_result=True)
def sweep_runs() -> dict:
    return recovery.sweep_everywhere()


@worker_ready.connect
def sweep_when_a_worker_starts(**kwargs):
    # Runs of a worker that died are found at once, without waiting for beat. Queued runs are
    # re-sent too: an in-memory broker lost them with the process that held them.
    recovery.sweep_everywhere(resend_queued_older_than=0)
    # A worker killed just before this one started may still hold a live lease here (its pool
    # children outlive it by a moment), so look at those runs once more when their leases ran out.
    leased = recovery.running_run_ids()
    if leased:
        timer = threading.Timer(settings.HUB_LEASE_SECONDS + 1, recovery.recover_if_lost, args=(leased,))
        timer.daemon = True
        timer.start()


@shared_task(name=titles.GENERATE_TITLE_TASK, ignore_result=True)
def generate_title(chat_id: str, reply_id: int) -> str | None:
    return titles.generate_title(chat_id=chat_id, reply_id=reply_id)
