"""Tools an agent can be given, and the wrapper that makes each tool step happen exactly once.

A tool step runs inside one database transaction together with the fenced write that records
its result in the run's checkpoint (and its `log` message). So either the side effect and the
record both commit, or neither does: a recovered turn replays recorded steps from the checkpoint
and never runs them again, and a worker that lost its lease cannot commit a side effect.
"""

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import close_old_connections, transaction

from agents_app.models import Run
from chats import services as chat_services
from chats.models import ContextBlock, Message
from chats.temporary.chats import NotWrittenHere


class LeaseLost(Exception):
    """This worker no longer owns the run; it must stop without writing."""


@dataclass
class TurnDeps:
    run_id: str
    token: object
    owner_id: int
    chat_id: str
    thread_id: int | None
    agent_id: int
    reply_message_id: int
    steps: dict = field(default_factory=dict)  # tool_call_id -> recorded step
    progress: object = None  # callable(event dict) the tool may call to report progress
    trigger_message_id: int | None = None
    current_call_id: str = ""  # the tool call being run (delegation keys its child by it)
    # How this turn asks another agent: delegate(deps, agent_name=, question=) -> answer. The turn
    # gives agents_app.turns.delegation.ask; this module sits below the turn machinery and never
    # imports it.
    delegate: Callable[..., str] | None = None
    # Where the turn's chat is (chats.temporary.scope.here()): tools run on other threads.
    place: Callable = contextlib.nullcontext


def _record_step(deps: TurnDeps, *, call_id: str, name: str, args: dict, result) -> dict:
    run = Run.objects.select_for_update().filter(pk=deps.run_id, lease_token=deps.token,
                                                  status=Run.Status.RUNNING).first()
    if run is None:
        raise LeaseLost(deps.run_id)
    step = {"id": call_id, "name": name, "args": args, "result": result, "at": time.time()}
    checkpoint = dict(run.checkpoint)
    checkpoint["tool_steps"] = {**checkpoint.get("tool_steps", {}), call_id: step}
    Run.objects.filter(pk=run.pk).update(checkpoint=checkpoint)
    chat = run.chat
    chat_services.send_message(
        chat=chat, content=f"{name}({json.dumps(args)}) → {json.dumps(result)[:2000]}", sender_agent=run.agent,
        thread=run.thread, kind="log", subkind="tool", format="text",
        data={"tool_call_id": call_id, "name": name, "args": args, "result": result},
        reply_to=Message.objects.get(pk=deps.reply_message_id),
    )
    return step


def run_step(deps: TurnDeps, *, call_id: str, name: str, args: dict, fn):
    """Run one tool call exactly once per turn chain (see the module docstring)."""
    if call_id in deps.steps:
        return deps.steps[call_id]["result"]
    owner_steps = deps.steps
    deps = dataclasses.replace(deps, current_call_id=call_id)
    with deps.place():
        step = _run_and_record(deps, call_id=call_id, name=name, args=args, fn=fn)
    owner_steps[call_id] = step
    return step["result"]


def _run_and_record(deps: TurnDeps, *, call_id: str, name: str, args: dict, fn) -> dict:
    try:
        if getattr(fn, "atomic", True):
            with transaction.atomic():
                result = fn(deps, **args)
                step = _record_step(deps, call_id=call_id, name=name, args=args, result=result)
        else:
            # A long tool (delegation) must not hold a transaction open; it is idempotent by
            # its call id instead.
            result = fn(deps, **args)
            with transaction.atomic():
                step = _record_step(deps, call_id=call_id, name=name, args=args, result=result)
    finally:
        close_old_connections()
    return step


# --- The tools ------------------------------------------------------------------------------

def record_effect(deps: TurnDeps, key: str) -> str:
    """Append a line to the user's `effects` memory block: a side effect tests can count."""
    block, _ = ContextBlock.objects.select_for_update().get_or_create(owner_id=deps.owner_id, label="effects")
    ContextBlock.objects.filter(pk=block.pk).update(content=block.content + f"{key}\n", version=block.version + 1)
    return f"recorded {key}"


def ask_agent(deps: TurnDeps, agent: str, question: str) -> str:
    """Delegate a question to another agent of the chat; returns its answer."""
    return deps.delegate(deps, agent_name=agent, question=question)


ask_agent.atomic = False


def _owner(deps: TurnDeps):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(pk=deps.owner_id)


def _chat(deps: TurnDeps):
    from chats.models import Chat

    return Chat.objects.filter(pk=deps.chat_id).first()


def search_messages(deps: TurnDeps, query: str, limit: int = 8) -> list[dict]:
    """Search the user's messages across all their chats; returns hits with chat ids and snippets."""
    from chats import search

    hits = search.search_messages(
        owner=_owner(deps), query=query, limit=min(limit, 20),
        exclude_ids=[deps.trigger_message_id] if deps.trigger_message_id else [], exclude_agent_id=deps.agent_id,
    )
    return [hit.as_dict() for hit in hits]


def search_files(deps: TurnDeps, query: str, limit: int = 8) -> list[dict]:
    """Search the text of the files the user put in their chats; returns passages with the file's
    name and address, its page and its chat."""
    from chats.attachments import search as file_search

    return file_search.search_files(owner=_owner(deps), query=query, limit=max(1, min(limit, 20)))


def list_chats(deps: TurnDeps, limit: int = 20) -> list[dict]:
    """The user's most recently active chats."""
    from chats import events
    from chats.selectors import directory_page

    chats = directory_page(user=_owner(deps), limit=max(1, min(limit, 50))).chats
    return [{"chat_id": str(c.pk), "title": c.title, "preview": c.last_message_preview,
             "updated_at": c.updated_at.isoformat(), "expires_at": events.chat_payload(c)["expires_at"]}
            for c in chats]


def read_memory(deps: TurnDeps, label: str = "memory") -> str:
    """Read one block of the user's shared memory (as it is now)."""
    from chats import memory

    block = memory.get_block(owner=_owner(deps), label=label)
    return memory.trimmed(block) if block else ""


def remember(deps: TurnDeps, text: str, label: str = "memory") -> str:
    """Append a fact to the user's shared memory."""
    from agents_app.models import Agent
    from chats import memory

    try:
        memory.append(owner=_owner(deps), label=label, text=text, chat=_chat(deps),
                      agent=Agent.objects.filter(pk=deps.agent_id).first())
    except NotWrittenHere as refused:
        return refused.message
    return f"remembered in {label}"


def set_memory(deps: TurnDeps, content: str, label: str = "memory") -> str:
    """Replace one block of the user's shared memory."""
    from agents_app.models import Agent
    from chats import memory

    try:
        memory.set_content(owner=_owner(deps), label=label, content=content, chat=_chat(deps),
                           agent=Agent.objects.filter(pk=deps.agent_id).first())
    except NotWrittenHere as refused:
        return refused.message
    return f"{label} replaced"


def index_document(deps: TurnDeps, label: str, key: str, content: str) -> str:
    """Put a document in the user's shared search index (re-indexing a key replaces it)."""
    from chats import search

    try:
        search.index_shared(owner=_owner(deps), label=label, key=key, content=content)
    except NotWrittenHere as refused:
        return refused.message
    return f"indexed {label}/{key}"


def search_documents(deps: TurnDeps, label: str, query: str) -> list[dict]:
    """Search the user's shared index under one label."""
    from chats import search

    return search.search_shared(owner=_owner(deps), label=label, query=query)


REGISTRY = {
    "record_effect": record_effect,
    "ask_agent": ask_agent,
    "search_messages": search_messages,
    "search_files": search_files,
    "list_chats": list_chats,
    "read_memory": read_memory,
    "remember": remember,
    "set_memory": set_memory,
    "index_document": index_document,
    "search_documents": search_documents,
}
# What a user may give an agent on its page (record_effect is for tests).
USER_TOOLS = [name for name in REGISTRY if name != "record_effect"]


def die(deps: TurnDeps) -> str:
    """Test only: SIGKILL the worker process running this turn, as an OOM kill would (a poison turn)."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


# Registered only with HUB_TEST_TOOLS (the chaos tests): an agent given `die` kills its worker.
TEST_TOOLS = {"die": die}
if settings.HUB_TEST_TOOLS:
    REGISTRY |= TEST_TOOLS
