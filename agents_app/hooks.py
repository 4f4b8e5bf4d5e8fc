"""The hooks an agent may override: what to do with a turn that was lost, or that kept dying.

An agent names its hooks class in settings["hooks"] as a dotted path; the default follows the
agent's recovery policy (continue: keep and continue; retry: drop and start again; stop: keep and
stop).
"""

from dataclasses import dataclass

from django.utils.module_loading import import_string

from agents_app.models import Agent, Run


@dataclass
class RecoveryContext:
    run: Run
    partial_text: str
    partial_parts: dict  # {"text": ..., "reasoning": ..., "tool_steps": {...}}
    attempt: int
    reason: str


@dataclass
class RecoveryDecision:
    """What recovery does with a lost turn (agents_app.turns.recovery); the old run becomes `recovered`.

    persist and continue_: the partial reply is kept and a continuation streams on into it.
    persist only: the partial reply is kept, `interrupted`; nothing more runs.
    continue_ only: the partial text is dropped and the turn starts again into the emptied reply
    (finished tool steps are reused, not run again).
    neither: the partial text is dropped; the reply stays, empty and `interrupted`.
    A turn that had produced nothing has nothing to keep: persist makes no difference.
    """

    persist: bool = True  # keep the partial reply (as interrupted)
    continue_: bool = True  # schedule a continuation (or, without persist, a fresh start)


class AgentHooks:
    def __init__(self, agent: Agent):
        self.agent = agent

    def on_recovery(self, ctx: RecoveryContext) -> RecoveryDecision:
        policy = self.agent.recovery_policy
        if policy == Agent.RecoveryPolicy.RETRY:
            return RecoveryDecision(persist=False, continue_=True)
        if policy == Agent.RecoveryPolicy.STOP:
            return RecoveryDecision(persist=True, continue_=False)
        return RecoveryDecision(persist=True, continue_=True)

    def on_exhausted(self, ctx: RecoveryContext) -> None:
        """Called once when a turn failed after too many recoveries."""


def hooks_for(agent: Agent) -> AgentHooks:
    path = (agent.settings or {}).get("hooks")
    cls = import_string(path) if path else AgentHooks
    return cls(agent)
