"""agents_app's side of chats.agent_port: the functions chats may call without importing agents_app.

AgentsAppConfig.ready hands this module to chats.agent_port.provide; it satisfies AgentPort by
the names below.
"""

from django.db.models import Q

from agents_app.models import Agent, Remote
from agents_app.remotes import attach_remote, remote_for_user
from agents_app.repair.selectors import stuck_streams
from agents_app.repair.services import settle_stuck_message
from agents_app.selectors import agent_for_user, agent_named_in_field, agents_usable_by, runs_in_chat
from agents_app.services import create_agent, regenerate

__all__ = [
    "agent_for_user", "agent_named_in_field", "agents_usable_by", "attach_remote", "regenerate", "remote_for_user",
    "rows_for_temporary_chat", "runs_in_chat", "settle_stuck_message", "source_agent", "stuck_streams",
]


def rows_for_temporary_chat(*, owner_id: int) -> list[tuple[type, list]]:
    """The agents the owner may use, and the owner's remotes without their headers (a secret)."""
    remotes = list(Remote.objects.filter(owner_id=owner_id))
    for remote in remotes:
        remote.encrypted_headers = ""
    return [(Agent, list(Agent.objects.filter(Q(owner_id=owner_id) | Q(owner__isnull=True)))), (Remote, remotes)]


def source_agent(*, user, name: str, model: str, description: str) -> Agent:
    """The user's own agent of that name, or a new one (with its main chat, as every owned agent)."""
    existing = Agent.objects.filter(owner=user, name=name, deleted_at__isnull=True).order_by("id").first()
    return existing or create_agent(owner=user, name=name, model=model, description=description)
