"""Delegation: one agent asks another through the durable-turn machinery.

The child turn has its own run (parent set, parent_tool_call_id = the asking tool call) and its
own reply message in the same thread, so it streams live to the chat and recovers on its own. A
recovered parent that asks again with the same tool call id finds the same child and waits for
its answer instead of starting a second one.
"""

import time

from django.db import close_old_connections, transaction

from agents_app.models import Agent, Run
from agents_app.tools import LeaseLost
from agents_app.turns import runs
from chats import services as chat_services
from chats.models import Chat, Message

POLL_SECONDS = 0.1
HEARTBEAT_SECONDS = 1.0  # well inside the shortest lease in use (3 s in the chaos tests)
TIMEOUT_SECONDS = 600


class DelegationError(RuntimeError):
    pass


def find_or_start_child(*, parent: Run, tool_call_id: str, agent_name: str, question: str) -> Run:
    existing = Run.objects.filter(
        parent_tool_call_id=tool_call_id, parent__trigger_message_id=parent.trigger_message_id,
        continues__isnull=True,
    ).first()
    if existing is not None:
        return existing
    chat = Chat.objects.get(pk=parent.chat_id)
    child_agent = (
        Agent.objects.filter(memberships__chat=chat, name__iexact=agent_name, deleted_at__isnull=True).first()
    )
    if child_agent is None:
        raise DelegationError(f"There is no agent called {agent_name} in this chat.")
    with transaction.atomic():
        question_message = chat_services.send_message(
            chat=chat, content=question, sender_agent=parent.agent, thread=parent.thread, kind="log",
            subkind="delegate", format="text", data={"to": child_agent.name, "tool_call_id": tool_call_id},
        )
        return runs.create_run(
            agent=child_agent, chat=chat, thread=parent.thread, trigger_message=question_message,
            kind=Run.Kind.DELEGATE, parent=parent, parent_tool_call_id=tool_call_id,
        )


def ask(deps, *, agent_name: str, question: str) -> str:
    """Called by the ask_agent tool (through TurnDeps.delegate): wait for the child's answer,
    reporting its progress."""
    parent = Run.objects.get(pk=deps.run_id)
    child = find_or_start_child(parent=parent, tool_call_id=deps.current_call_id, agent_name=agent_name,
                                question=question)
    deadline = time.monotonic() + TIMEOUT_SECONDS
    next_heartbeat = 0.0
    try:
        while time.monotonic() < deadline:
            latest = runs.latest_in_chain(child)
            reply = Message.objects.filter(pk=latest.reply_message_id).only("content", "status").first()
            if deps.progress:
                # Waiting on a child that works is progress, output or not: the asking turn's
                # stall watchdog must not give it up while its child thinks or is recovered.
                chars = len(reply.content) if reply is not None else 0
                deps.progress({"child_run_id": str(latest.pk), "chars": chars})
            if latest.status == Run.Status.SUCCEEDED and reply is not None:
                return reply.content
            if latest.status in (Run.Status.FAILED, Run.Status.CANCELLED):
                return f"{agent_name} could not answer: {latest.error or latest.status}"
            if latest.status == Run.Status.RECOVERED:
                # The last of the chain, recovered with no continuation: its agent's recovery hook
                # chose to stop there (the continuation is queued in the same transaction).
                partial = f" It had written: {reply.content}" if reply is not None and reply.content else ""
                return f"{agent_name} was interrupted and did not go on.{partial}"
            # Keep our own lease alive while the child works: a recovered parent replays this
            # call before its pump (and its heartbeat) starts, and would otherwise lose the lease
            # every HUB_LEASE_SECONDS until its recoveries ran out.
            if time.monotonic() >= next_heartbeat:
                if not runs.heartbeat(deps.run_id, deps.token):
                    raise LeaseLost(deps.run_id)
                next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS
            time.sleep(POLL_SECONDS)
    finally:
        close_old_connections()
    return f"{agent_name} did not answer in time."
