"""The turns the chaos tests kill, one per path that starts a turn, and what must hold afterwards.

Every turn uses fresh scripted agents (test:scripted): the reply is deterministic, so the text a
turn must end with is known (agents_app.scripted.full_reply), and each tool call records an
effect key of its own, so a step that ran twice shows as a doubled line in the `effects` block.
"""

import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from agents_app import services as agent_services
from agents_app.models import Agent, Run
from agents_app.scripted import full_reply
from agents_app.turns import runs
from chats import services as chat_services
from chats.models import Chat, ContextBlock, Message
from chats.streams import replay_buffer
from tests.chaos.cluster import Cluster, owner_pid, wait_for

CHUNK = 3
DELAY = 0.04  # ~75 characters a second: a reply with its tool calls takes 1-2 s
REPLY = "Reply to {prompt}: the durable turn streams on, every word in its place, nothing lost."
CHILD_REPLY = "The child agent's answer to {prompt}: forty-two, checked twice."
SETTLE_SECONDS = 60


def effect(key: str) -> dict:
    return {"name": "record_effect", "args": {"key": key}}


def script(reply: str, tools=(), *, delay: float = DELAY) -> dict:
    return {"reply": reply, "chunk": CHUNK, "delay": delay, "tools": list(tools)}


def streaming_seconds(script_: dict, prompt: str) -> float:
    """How long the uninterrupted turn streams: the tool arguments, then the reply."""
    chunk, delay = script_["chunk"], script_["delay"]
    pieces = sum(max(1, math.ceil(len(json.dumps(t["args"])) / chunk)) - 1 for t in script_["tools"])
    return (pieces + math.ceil(len(full_reply(script_, prompt)) / chunk)) * delay


def make_agent(user, name: str, script_: dict, **fields) -> Agent:
    tools = sorted({t["name"] for t in script_["tools"]})
    return agent_services.create_agent(owner=user, name=name, model="test:scripted",
                                       settings={"script": script_}, tools=tools, **fields)


@dataclass
class Expected:
    """One agent's reply in one chat, as the uninterrupted turn would have left it."""

    agent: Agent
    chat: Chat
    text: str
    effects: list[str]


@dataclass
class Turn:
    expected: list[Expected]
    target: Callable[[], Run | None]  # the run whose worker is to be killed (first of its chain)
    seconds: float  # how long the target streams uninterrupted
    effect_keys: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.effect_keys = [key for e in self.expected for key in e.effects]


# --- The paths ------------------------------------------------------------------------------

def user_message(user, n: int) -> Turn:
    """chats.services.send_message: a user's message gets a reply."""
    keys = [f"message-{n}-a", f"message-{n}-b"]
    agent_script = script(REPLY, [effect(k) for k in keys])
    agent = make_agent(user, f"Writer{n}", agent_script)
    prompt = f"question {n}"
    trigger = chat_services.send_message(chat=agent.main_chat, content=prompt)
    return Turn([Expected(agent, agent.main_chat, full_reply(agent_script, prompt), keys)],
                target=lambda: Run.objects.filter(trigger_message=trigger, agent=agent).order_by("created_at").first(),
                seconds=streaming_seconds(agent_script, prompt))


def continue_after_stop(user, n: int) -> Turn:
    """agents_app.services.continue_last_turn: the user stopped a reply midway, then continues it."""
    prompt = f"continue {n}"
    agent = make_agent(user, f"Continuer{n}", script(REPLY, delay=DELAY * 2))
    chat_services.send_message(chat=agent.main_chat, content=prompt)
    first = wait_for(lambda: Run.objects.filter(agent=agent, reply_message__isnull=False).first(),
                     timeout=SETTLE_SECONDS, what="the first reply to start")
    wait_for(lambda: len(replay_buffer().read(first.reply_message_id)["text"]) >= 12, timeout=SETTLE_SECONDS,
             what="the first reply to stream a few words")
    agent_services.cancel_run(run=first)
    wait_for(lambda: Message.objects.filter(pk=first.reply_message_id).exclude(status="streaming").exists(),
             timeout=SETTLE_SECONDS, what="the stopped reply to settle")
    keys = [f"continue-{n}-a", f"continue-{n}-b"]
    agent_script = script(REPLY, [effect(k) for k in keys])
    agent_services.update_agent(agent=agent, settings={"script": agent_script}, tools=["record_effect"])
    run = agent_services.continue_last_turn(chat=agent.main_chat, agent=agent)
    return Turn([Expected(agent, agent.main_chat, full_reply(agent_script, prompt), keys)],
                target=lambda: run, seconds=streaming_seconds(agent_script, prompt))


def regenerate_reply(user, n: int) -> Turn:
    """agents_app.services.regenerate: a finished reply is answered again, into the same message."""
    prompt = f"regenerate {n}"
    agent = make_agent(user, f"Regenerator{n}", script(REPLY, delay=0))
    chat_services.send_message(chat=agent.main_chat, content=prompt)
    reply = wait_for(lambda: Message.objects.filter(sender_agent=agent, kind="message", status="final").first(),
                     timeout=SETTLE_SECONDS, what="the first reply to finish")
    keys = [f"regenerate-{n}-a", f"regenerate-{n}-b"]
    agent_script = script(REPLY, [effect(k) for k in keys])
    agent_services.update_agent(agent=agent, settings={"script": agent_script}, tools=["record_effect"])
    run = agent_services.regenerate(message=reply)
    return Turn([Expected(agent, agent.main_chat, full_reply(agent_script, prompt), keys)],
                target=lambda: run, seconds=streaming_seconds(agent_script, prompt))


def delegation(user, n: int, *, target: str) -> Turn:
    """The ask_agent tool: a lead agent asks a member of the same chat and waits for its answer."""
    child_keys = [f"delegate-{n}-child"]
    child_script = script(CHILD_REPLY, [effect(k) for k in child_keys])
    child = make_agent(user, f"Researcher{n}", child_script, reply_policy="never")
    question = f"what is the answer, case {n}?"
    lead_keys = [f"delegate-{n}-lead-a", f"delegate-{n}-lead-b"]
    lead_script = script(REPLY, [effect(lead_keys[0]),
                                 {"name": "ask_agent", "args": {"agent": child.name, "question": question}},
                                 effect(lead_keys[1])])
    lead = make_agent(user, f"Lead{n}", lead_script)
    team = chat_services.create_chat(owner=user, title=f"Team {n}", agents=[lead, child])
    prompt = f"task {n}"
    chat_services.send_message(chat=team, content=prompt)
    child_prompt = f"{lead.name}: {question}"
    child_seconds = streaming_seconds(child_script, child_prompt)
    expected = [Expected(lead, team, full_reply(lead_script, prompt), lead_keys),
                Expected(child, team, full_reply(child_script, child_prompt), child_keys)]
    if target == "child":
        return Turn(expected, target=lambda: Run.objects.filter(agent=child, kind="delegate",
                                                                continues__isnull=True).first(),
                    seconds=child_seconds)
    return Turn(expected, target=lambda: Run.objects.filter(agent=lead, continues__isnull=True).first(),
                seconds=streaming_seconds(lead_script, prompt) + child_seconds)


PATHS = {
    "message": user_message,
    "continue": continue_after_stop,
    "regenerate": regenerate_reply,
    "delegation-parent": lambda user, n: delegation(user, n, target="parent"),
    "delegation-child": lambda user, n: delegation(user, n, target="child"),
}


# --- Killing --------------------------------------------------------------------------------

def wait_until_started(turn: Turn) -> Run:
    """The first run of the turn's chain, once a worker has taken it and created its reply."""
    first = wait_for(turn.target, timeout=SETTLE_SECONDS, what="the run to be created")

    def started():
        latest = runs.latest_in_chain(first)
        return latest.is_terminal or (latest.status == Run.Status.RUNNING and latest.reply_message_id)

    wait_for(started, timeout=SETTLE_SECONDS, what="a worker to take the run")
    return first


def kill_at_a_random_moment(cluster: Cluster, turn: Turn, rng: random.Random) -> bool:
    """SIGKILL the worker running the turn at a random moment of its stream and start another.

    Returns False when the turn was already over at that moment (nothing was killed mid-turn):
    also when it ended between the look at its run and the signal, a window that a busy machine
    widens.
    """
    first = wait_until_started(turn)
    time.sleep(rng.uniform(0.0, turn.seconds))  # the chaos: a random moment, not an assertion
    victim = runs.latest_in_chain(first)
    worker = cluster.worker_running(victim) if victim.status == Run.Status.RUNNING else None
    if worker is None:
        return False
    cluster.kill_and_replace(worker)
    victim.refresh_from_db()
    return victim.status in (Run.Status.RUNNING, Run.Status.RECOVERED)


# --- What must hold -------------------------------------------------------------------------

def wait_until_settled(timeout: float = SETTLE_SECONDS) -> None:
    """Every run has ended: none is queued or running (a killed one stays running until recovered)."""
    wait_for(lambda: not Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).exists(),
             timeout=timeout, what="every run to end (recovered, continued and finished)", every=0.1)


def effect_counts(user) -> Counter:
    block = ContextBlock.objects.filter(owner=user, label="effects").first()
    return Counter(block.content.splitlines() if block else [])


def assert_turn_outcome(turn: Turn, user) -> None:
    """What a user sees after the chaos: each question answered once, in full, each effect once."""
    for expected in turn.expected:
        replies = list(Message.objects.filter(chat=expected.chat, sender_agent=expected.agent, kind="message"))
        assert len(replies) == 1, f"{expected.agent.name} left {len(replies)} replies: {replies}"
        reply = replies[0]
        assert reply.status == Message.Status.FINAL, (reply.status, reply.data.get("error"), runs_of(expected.agent))
        assert reply.content == expected.text, runs_of(expected.agent)
    effects = effect_counts(user)
    doubled = {key: count for key, count in effects.items() if count > 1}
    assert not doubled, f"side effects that happened more than once: {doubled}"
    missing = [key for key in turn.effect_keys if effects[key] != 1]
    assert not missing, f"side effects that never happened: {missing}"


def runs_of(agent) -> list[dict]:
    """An agent's runs and their history, to explain a failure."""
    return [{"kind": r.kind, "status": r.status, "attempt": r.attempt, "error": r.error, "history": r.history}
            for r in Run.objects.filter(agent=agent).order_by("created_at")]


def assert_delegation_answered(turn: Turn) -> None:
    """The lead asked its child once and got the child's final answer as the tool's result."""
    lead, child = turn.expected
    assert Run.objects.filter(agent=child.agent, kind="delegate", continues__isnull=True).count() == 1
    steps = Message.objects.filter(chat=lead.chat, sender_agent=lead.agent, kind="log", subkind="tool",
                                   data__name="ask_agent")
    assert [step.data["result"] for step in steps] == [child.text]


def assert_runs_lost_only_with_their_worker(killed_pids: set[int]) -> None:
    """Recovery took over only runs whose process was killed: a live worker never loses its turn."""
    taken = [(r.kind, r.attempt, r.lease_owner, r.history[-1].get("reason"))
             for r in Run.objects.filter(status=Run.Status.RECOVERED) if owner_pid(r) not in killed_pids]
    assert not taken, f"runs recovered away from a live worker: {taken}"


def assert_no_run_left_behind() -> None:
    """No run queued or running, and no checkpoint kept on a run that has ended."""
    assert not Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).exists()
    leftovers = Run.objects.filter(status__in=Run.TERMINAL).exclude(checkpoint={})
    assert not leftovers.exists(), [(r.pk, r.status, r.checkpoint) for r in leftovers]
