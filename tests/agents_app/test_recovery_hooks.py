"""Recovery hooks: each of persist × continue_ leaves the reply and the runs as its name says, and
code that follows a turn with agents_app.services.chat() gets the whole reply once across a recovery.

The turns are interrupted for real: the scripted model stalls mid-reply and the turn's watchdog
gives the run up to recovery, which asks the agent's hooks.
"""

import threading
import time

import pytest
from django.db import close_old_connections

from agents_app import services as agent_services
from agents_app.hooks import AgentHooks, RecoveryDecision
from agents_app.models import Agent, Run
from agents_app.turns import runs
from agents_app.turns.execution import execute_run
from chats import services
from chats.models import ContextBlock, Message

# Run alone in `make test`: the stall watchdog fires after half a second without progress, which
# a machine busy with other tests' workers can give a healthy turn.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.alone]

FULL = "The quick brown fox jumps over the lazy dog."
HOOKS = "tests.agents_app.test_recovery_hooks.DecidedInSettings"
SEEN: list[dict] = []  # what each hook call was given


class DecidedInSettings(AgentHooks):
    """Decides as the agent's settings["decision"] says, and notes what it was given."""

    def on_recovery(self, ctx):
        SEEN.append({"partial_text": ctx.partial_text, "attempt": ctx.attempt, "reason": ctx.reason,
                     "tool_steps": sorted(ctx.partial_parts["tool_steps"])})
        decision = self.agent.settings["decision"]
        return RecoveryDecision(persist=decision["persist"], continue_=decision["continue"])


@pytest.fixture(autouse=True)
def _quick_watchdog(settings):
    settings.HUB_STALL_SECONDS = 0.5
    SEEN.clear()


@pytest.fixture
def stalling_agent(scripted_agent):
    """A scripted agent that records an effect, then stalls after "The quick brown"."""
    def make(*, persist=True, continue_=True, stall_after=len("The quick brown"), reply=FULL):
        agent = scripted_agent(reply=reply, chunk=5, tools=[("record_effect", {"key": "k"})],
                               stall_after=stall_after)
        agent.settings = {**agent.settings, "hooks": HOOKS, "decision": {"persist": persist, "continue": continue_}}
        agent.save()
        return agent

    return make


def stop_stalling(agent, **script) -> None:
    """The model answers in full from now on (optionally with another script)."""
    agent = Agent.objects.get(pk=agent.pk)
    settings = dict(agent.settings)
    settings["script"] = {**{k: v for k, v in settings["script"].items() if k != "stall_after"}, **script}
    Agent.objects.filter(pk=agent.pk).update(settings=settings)


def chain_of(trigger) -> list[tuple[str, str, int]]:
    first = Run.objects.get(trigger_message=trigger, continues__isnull=True)
    return [(run.kind, run.status, run.attempt) for run in runs.runs_from(first.pk)]


def effects(user) -> str:
    return ContextBlock.objects.get(owner=user, label="effects").content


# --- The four decisions ---------------------------------------------------------------------

def test_persist_and_continue_keeps_the_partial_reply_and_finishes_it(stalling_agent, run_now, user):
    agent = stalling_agent(persist=True, continue_=True)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now(limit=1) == ["stalled"]
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert (reply.status, reply.content) == ("interrupted", "The quick brown")
    assert SEEN == [{"partial_text": "The quick brown", "attempt": 1, "reason": "stalled",
                     "tool_steps": ["record_effect-0"]}]

    stop_stalling(agent)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert (reply.status, reply.content) == ("final", FULL)
    assert chain_of(trigger) == [("reply", "recovered", 1), ("continue", "succeeded", 2)]
    assert effects(user) == "k\n"


def test_persist_without_continue_keeps_the_partial_reply_interrupted(stalling_agent, run_now, user):
    agent = stalling_agent(persist=True, continue_=False)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["stalled"]

    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert (reply.status, reply.content) == ("interrupted", "The quick brown")
    assert chain_of(trigger) == [("reply", "recovered", 1)]
    assert effects(user) == "k\n"


def test_continue_without_persist_drops_the_partial_text_and_starts_again(stalling_agent, run_now, user):
    agent = stalling_agent(persist=False, continue_=True)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now(limit=1) == ["stalled"]
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert (reply.status, reply.content) == ("streaming", "")  # emptied, waiting for the new start

    stop_stalling(agent, reply="A different answer.")
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert (reply.status, reply.content) == ("final", "A different answer.")
    assert chain_of(trigger) == [("reply", "recovered", 1), ("reply", "succeeded", 2)]
    assert effects(user) == "k\n", "the finished tool step is reused, not run again"


def test_neither_persist_nor_continue_drops_the_partial_text_and_stops(stalling_agent, run_now, user):
    agent = stalling_agent(persist=False, continue_=False)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["stalled"]

    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert (reply.status, reply.content) == ("interrupted", "")
    assert reply.data.get("reasoning", "") == ""
    assert chain_of(trigger) == [("reply", "recovered", 1)]
    assert not Run.objects.filter(status__in=["queued", "running"]).exists()


@pytest.mark.parametrize("persist", [True, False])
def test_a_turn_stopped_before_it_wrote_anything_is_not_left_streaming(persist, scripted_agent, run_now):
    agent = scripted_agent(reply=FULL, chunk=5, stall_after=0)
    agent.settings = {**agent.settings, "hooks": HOOKS, "decision": {"persist": persist, "continue": False}}
    agent.save()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["stalled"]

    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert (reply.status, reply.content) == ("interrupted", "")
    assert chain_of(trigger) == [("reply", "recovered", 1)]


# --- Code that follows a turn ---------------------------------------------------------------

def worker_running(agent, *, turns: int, between=None):
    """A worker thread that executes the agent's next `turns` queued runs; between(n) runs after the
    n-th (the first is expected to stall)."""
    outcomes = []

    def body():
        try:
            for n in range(turns):
                deadline = time.monotonic() + 10
                while not (queued := Run.objects.filter(agent=agent, status="queued").first()):
                    assert time.monotonic() < deadline, "no run was queued"
                    time.sleep(0.02)
                outcomes.append(execute_run(queued.pk))
                if between is not None:
                    between(n)
        finally:
            close_old_connections()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, outcomes


def applied(deltas: list[dict]) -> str:
    """The text a follower builds by putting each delta at its offset."""
    text = ""
    for delta in deltas:
        text = text[:delta["offset"]] + delta["text"]
    return text


def test_chat_follows_a_recovered_turn_and_returns_the_whole_reply_once(stalling_agent):
    agent = stalling_agent(persist=True, continue_=True)
    thread, outcomes = worker_running(agent, turns=2, between=lambda n: stop_stalling(agent))
    deltas, done = [], []

    reply = agent_services.chat(agent, "x", on_event=deltas.append, on_done=done.append, timeout=30)
    thread.join(10)

    assert outcomes == ["stalled", "succeeded"]
    assert reply.content == FULL and reply.status == "final" and done == [reply]
    assert "".join(d["text"] for d in deltas) == FULL  # each character once
    assert [d["offset"] for d in deltas] == sorted(d["offset"] for d in deltas)


def test_chat_follows_a_turn_started_again_and_ends_with_the_new_reply(stalling_agent):
    agent = stalling_agent(persist=False, continue_=True)
    thread, outcomes = worker_running(agent, turns=2,
                                      between=lambda n: stop_stalling(agent, reply="A different answer."))
    deltas = []

    reply = agent_services.chat(agent, "x", on_event=deltas.append, timeout=30)
    thread.join(10)

    assert outcomes == ["stalled", "succeeded"]
    assert reply.content == "A different answer."
    assert applied(deltas) == "A different answer."
    restart = next(i for i, d in enumerate(deltas) if i and d["offset"] == 0)
    assert applied(deltas[:restart]) == "The quick brown"  # what the follower had before the new start


def test_chat_returns_a_reply_its_hook_stopped(stalling_agent):
    agent = stalling_agent(persist=True, continue_=False)
    thread, outcomes = worker_running(agent, turns=1)
    deltas = []

    reply = agent_services.chat(agent, "x", on_event=deltas.append, timeout=30)
    thread.join(10)

    assert outcomes == ["stalled"]
    assert (reply.status, reply.content) == ("interrupted", "The quick brown")
    assert applied(deltas) == "The quick brown"


def ask_and_answer(parent, child, user, *, child_waits=0.0) -> tuple[str, str, str]:
    """Lead asks child "Look it up" in a chat of both; the child's run starts child_waits seconds
    after it is queued. (child's outcome, parent's outcome, what the ask_agent tool returned)."""
    from tests.agents_app.test_turns import run_in_thread

    chat = services.create_chat(owner=user, title="Team", agents=[parent, child])
    services.send_message(chat=chat, content="go")
    parent_thread, parent_outcome = run_in_thread(Run.objects.get(agent=parent).pk)
    deadline = time.monotonic() + 10
    while not Run.objects.filter(agent=child, kind="delegate").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(child_waits)
    child_thread, child_outcome = run_in_thread(Run.objects.get(agent=child, kind="delegate").pk)
    child_thread.join(20)
    parent_thread.join(20)
    step = Message.objects.get(kind="log", subkind="tool", sender_agent=parent, data__name="ask_agent")
    return child_outcome["value"], parent_outcome["value"], step.data["result"]


def lead(scripted_agent):
    return scripted_agent(name="Lead", reply="Done asking.",
                          tools=[("ask_agent", {"agent": "Researcher", "question": "Look it up"})])


def test_a_parent_hears_at_once_that_its_child_was_interrupted_and_stopped(stalling_agent, scripted_agent, user):
    """A delegated child whose hook keeps its partial reply and stops: the asking agent is told so
    and answers, instead of waiting out the delegation's ten minutes."""
    child = stalling_agent(persist=True, continue_=False)
    Agent.objects.filter(pk=child.pk).update(name="Researcher", reply_policy="never")

    assert ask_and_answer(lead(scripted_agent), child, user) == (
        "stalled", "succeeded", "Researcher was interrupted and did not go on. It had written: The quick brown")


def test_a_parent_waiting_on_a_queued_child_is_not_taken_for_stalled(scripted_agent, user):
    """A child that waits in the queue longer than the stall watchdog allows: the asking turn keeps
    waiting (waiting on a child is progress) and answers once the child has."""
    child = scripted_agent(name="Researcher", reply="Found it.", reply_policy="never")

    # Three stall windows with no worker on the child.
    assert ask_and_answer(lead(scripted_agent), child, user, child_waits=1.5) == (
        "succeeded", "succeeded", "Found it.")
