"""Celery tasks sent about a temporary chat run on its image.

A task sent from inside a temporary chat's image (a turn, a title) carries the chat's id in a
message header; the worker runs it inside that image. Nothing else about a task changes, so the
turn machinery does not know which kind of chat it serves.
"""

import contextlib
import logging
import threading

from celery.signals import before_task_publish, task_postrun, task_prerun

from chats.temporary import mirror
from chats.temporary.scope import current, inside

HEADER = "hub_temporary_chat"

log = logging.getLogger(__name__)

_running = threading.local()


@before_task_publish.connect
def carry_the_temporary_chat(headers=None, **kwargs):
    chat_id = current()
    if chat_id is not None and headers is not None:
        headers[HEADER] = chat_id


@task_prerun.connect
def enter_the_temporary_chat(task_id=None, task=None, **kwargs):
    chat_id = getattr(task.request, HEADER, None) if task is not None else None
    if not chat_id:
        return
    stack = contextlib.ExitStack()
    stack.enter_context(inside(chat_id))
    stacks = getattr(_running, "stacks", None)
    if stacks is None:
        stacks = _running.stacks = {}
    stacks[task_id] = stack
    try:
        mirror.bring_up_to_date(chat_id)
    except Exception:
        # The task still runs on the image (and finds it gone itself if it expired).
        log.warning("could not bring temporary chat %s's copies up to date", chat_id, exc_info=True)


@task_postrun.connect
def leave_the_temporary_chat(task_id=None, **kwargs):
    stack = getattr(_running, "stacks", {}).pop(task_id, None)
    if stack is not None:
        stack.close()
