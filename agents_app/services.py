"""Every write to the agent registry."""

from django.db import transaction
from django.utils import timezone

from agents_app.models import Agent
from chats import services as chat_services
from hub.errors import InvalidInput

EDITABLE_FIELDS = (
    "name", "avatar", "description", "model", "base_url", "system_prompt", "settings", "tools",
    "reply_policy", "recovery_policy",
)


def _validate(agent: Agent) -> None:
    if not agent.name.strip():
        raise InvalidInput.for_field("name", "may not be empty")
    if not agent.model.strip():
        raise InvalidInput.for_field("model", "may not be empty")
    if agent.reply_policy not in Agent.ReplyPolicy.values:
        raise InvalidInput.for_field("reply_policy", f"must be one of {', '.join(Agent.ReplyPolicy.values)}")
    if agent.recovery_policy not in Agent.RecoveryPolicy.values:
        raise InvalidInput.for_field(
            "recovery_policy", f"must be one of {', '.join(Agent.RecoveryPolicy.values)}"
        )
    if not isinstance(agent.settings, dict):
        raise InvalidInput.for_field("settings", "must be an object")
    if not isinstance(agent.tools, list):
        raise InvalidInput.for_field("tools", "must be a list")


@transaction.atomic
def create_agent(*, owner, name: str, model: str, **fields) -> Agent:
    """Create an agent and, for an owned agent, its main chat with the agent as a member.

    owner None makes a shared agent (staff) that every user may add; it has no main chat.
    Raises InvalidInput for a missing name or model or an unknown policy.
    """
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput.for_field(sorted(unknown)[0], "unknown field")
    agent = Agent(owner=owner, name=(name or "").strip(), model=(model or "").strip(), **fields)
    _validate(agent)
    agent.save()
    if owner is not None:
        chat = chat_services.create_chat(
            owner=owner, title=agent.name, description=agent.description, picture=agent.avatar, agents=[agent]
        )
        agent.main_chat = chat
        agent.save(update_fields=["main_chat"])
    return agent


@transaction.atomic
def update_agent(*, agent: Agent, **fields) -> Agent:
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput.for_field(sorted(unknown)[0], "unknown field")
    for name, value in fields.items():
        setattr(agent, name, value.strip() if isinstance(value, str) and name in ("name", "model") else value)
    _validate(agent)
    agent.save()
    return agent


@transaction.atomic
def delete_agent(*, agent: Agent) -> Agent:
    """Soft-delete an agent: it leaves every chat; its past messages keep their sender."""
    agent.deleted_at = timezone.now()
    agent.save(update_fields=["deleted_at"])
    for membership in agent.memberships.select_related("chat"):
        chat_services.remove_member(chat=membership.chat, agent=agent)
    return agent
