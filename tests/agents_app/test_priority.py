"""CPU priority: the threads that start and end turns yield to the threads that stream.

On a machine with every core busy, a burst of new turns must not delay the deltas of replies
already streaming (docs/performance.md, the streaming benchmark), so task threads run at
HUB_BACKGROUND_NICE while the model loop, the event loop and the web process's frame threads do
not.
"""

import os
import sys
import threading
from types import SimpleNamespace

import pytest

from agents_app.models import Run
from hub.startup import yield_to_streams

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread priority is Linux's")


def nice_of(pid: int, thread_id: int) -> int:
    """A thread's nice as the kernel reports it (/proc/<pid>/task/<tid>/stat, field 19)."""
    with open(f"/proc/{pid}/task/{thread_id}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return int(fields[16])  # fields after the name start at the 3rd; nice is the 19th


def nice_in_new_thread(function) -> tuple[int, int]:
    """(nice after function ran in a new thread, nice of this thread meanwhile)."""
    seen = {}

    def body():
        function()
        seen["nice"] = nice_of(os.getpid(), threading.get_native_id())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return seen["nice"], nice_of(os.getpid(), threading.get_native_id())


def celery_task(*, eager: bool):
    """What the task_prerun handler reads of a task: whether it runs eagerly, in its caller."""
    return SimpleNamespace(request=SimpleNamespace(is_eager=eager))


def test_a_background_thread_is_lowered_and_its_process_is_not(settings):
    settings.HUB_BACKGROUND_NICE = 19
    before = nice_of(os.getpid(), threading.get_native_id())
    lowered, caller = nice_in_new_thread(yield_to_streams)
    assert lowered == 19
    assert caller == before  # the calling (streaming) thread keeps its priority


def test_zero_leaves_the_priority_alone(settings):
    settings.HUB_BACKGROUND_NICE = 0
    lowered, caller = nice_in_new_thread(yield_to_streams)
    assert lowered == caller


def test_a_task_thread_starts_the_model_loop_before_it_lowers_itself(settings, monkeypatch):
    """A thread inherits its creator's priority: the first turn of a process must not hand its
    own lowered priority to the model loop that streams every turn."""
    from agents_app.turns import modelloop
    from agents_app.turns.tasks import run_tasks_below_the_model_loop

    settings.HUB_BACKGROUND_NICE = 19
    monkeypatch.setattr(modelloop, "_pid", None)  # as in a new worker process: no loop yet
    lowered, _ = nice_in_new_thread(lambda: run_tasks_below_the_model_loop(task=celery_task(eager=False)))
    assert lowered == 19
    assert nice_of(os.getpid(), modelloop.model_loop().thread.native_id) == 0


def test_an_eager_task_leaves_its_callers_thread_alone(settings):
    from agents_app.turns.tasks import run_tasks_below_the_model_loop

    settings.HUB_BACKGROUND_NICE = 19
    lowered, caller = nice_in_new_thread(lambda: run_tasks_below_the_model_loop(task=celery_task(eager=True)))
    assert lowered == caller


def test_the_web_process_stores_sent_messages_at_the_event_loops_priority(settings):
    """Lowered, a frame thread that held the GIL when the kernel put it off made the event loop
    wait for it: every stream's deltas and the burst's stores came later."""
    from chats.consumers import FrameThreads

    settings.HUB_BACKGROUND_NICE = 19
    frame_threads = FrameThreads(2)
    try:
        thread_ids = frame_threads.run_on_each(threading.get_native_id)
        assert len(set(thread_ids)) == 2
        here = nice_of(os.getpid(), threading.get_native_id())
        assert {nice_of(os.getpid(), thread_id) for thread_id in thread_ids} == {here}
    finally:
        for executor in frame_threads.executors:
            executor.shutdown()


@pytest.mark.needs_redis
@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)  # a worker process reads what this test wrote
def test_a_worker_runs_a_turn_on_a_lowered_thread_and_streams_at_full_priority(scripted_agent, tmp_path):
    from chats import services
    from tests.chaos.cluster import Cluster, wait_for

    cluster = Cluster(tmp_path)
    try:
        (worker,) = cluster.start_workers(1, pool="threads", concurrency=2)
        agent = scripted_agent(reply="A slow reply, " * 20, chunk=2, delay=0.05)  # about 7 s
        trigger = services.send_message(chat=agent.main_chat, content="hi")
        run = wait_for(lambda: Run.objects.filter(trigger_message=trigger, status="running",
                                                  reply_message__isnull=False).first(),
                       timeout=30, what="the turn to start")
        _, pid, thread_id = run.lease_owner.split(":")
        assert int(pid) == worker.pid
        assert nice_of(worker.pid, int(thread_id)) == 19  # the turn's own thread
        threads = {int(t): nice_of(worker.pid, int(t)) for t in os.listdir(f"/proc/{worker.pid}/task")}
        assert threads[worker.pid] == 0  # the worker itself is not lowered...
        streaming = [t for t, nice in threads.items() if nice == 0 and t != worker.pid]
        assert streaming  # ...nor the model loop that streams the reply
        # It streams meanwhile: a delta is stored while the turn still runs on its lowered thread.
        wait_for(lambda: Run.objects.filter(pk=run.pk, status="running", delta_count__gt=0).exists()
                 or Run.objects.get(pk=run.pk).status != "running",
                 timeout=30, what="the first delta or the turn's end")
        run.refresh_from_db()
        assert run.status == "running" and run.delta_count > 0
    finally:
        cluster.shutdown()
