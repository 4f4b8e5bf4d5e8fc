"""Reads of agents and runs; each takes the user."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Q

from agents_app.models import Agent, Remote, Run
from hub.errors import NotFound


def agents_usable_by(*, user):
    """The user's own agents and the shared ones (no owner), not deleted."""
    return Agent.objects.filter(Q(owner=user) | Q(owner__isnull=True), deleted_at__isnull=True).order_by("name", "id")


def agent_for_user(*, user, agent_id, own: bool = False) -> Agent:
    """An agent the user may use (own=True: one they own and may change); otherwise NotFound."""
    agents = Agent.objects.filter(owner=user, deleted_at__isnull=True) if own else agents_usable_by(user=user)
    try:
        return agents.get(pk=int(agent_id))
    except (Agent.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such agent") from None


def agent_named_in_field(*, user, agent_id, field: str) -> Agent:
    """agent_for_user for an id given in a request's field: an unknown id is a bad field (400)."""
    from hub.errors import InvalidInput

    try:
        return agent_for_user(user=user, agent_id=agent_id)
    except NotFound:
        raise InvalidInput.for_field(field, f"no agent {agent_id}") from None


def run_for_user(*, user, run_id) -> Run:
    """A run in one of the user's chats; another user's, or a malformed id, is NotFound."""
    try:
        return Run.objects.select_related("agent", "chat").get(pk=run_id, chat__owner=user)
    except (Run.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound("no such run") from None


def runs_in_chat(*, chat, run_ids=()) -> list[Run]:
    """The chat's runs with these ids, and every run still queued or running.

    The chat page shows each reply's run state from these (thinking, recovered, cancelled, failed).
    """
    wanted = Q(pk__in=[r for r in run_ids if r][:200]) | Q(status__in=Run.LIVE)
    # The page shows a run's state only: its checkpoint and model history (often many kilobytes of
    # JSON each) are left in the database.
    runs = Run.objects.filter(wanted, chat=chat).defer("checkpoint", "history", "usage")
    return list(runs.order_by("created_at"))


def runs_triggered_by(*, message) -> list[Run]:
    """The runs a message started (one per answering agent), oldest first."""
    return list(Run.objects.filter(trigger_message=message).order_by("created_at", "id"))


def runs_of_chat(*, chat, limit: int = 50) -> list[Run]:
    """A chat's newest runs, newest first (the caller fetched the chat with chat_for_user)."""
    return list(Run.objects.filter(chat=chat).order_by("-created_at", "-id")[:limit])


def model_providers_in_use() -> set[str]:
    """The providers ("openai", "anthropic", "ollama", …) of the hub's live agents' models."""
    models = Agent.objects.filter(deleted_at__isnull=True).values_list("model", flat=True).distinct()
    return {model.partition(":")[0] for model in models}


def any_remote_exists() -> bool:
    return Remote.objects.exists()


def replies_refused_to(*, message) -> list:
    """The replies to message that were stored without a run (its user's monthly token limit), oldest
    first. No query when there is no limit."""
    from agents_app.usage.limit import monthly_limit
    from chats.models import Message

    if not monthly_limit():
        return []
    return list(Message.objects.filter(chat_id=message.chat_id, reply_to=message, kind=Message.Kind.MESSAGE,
                                       sender_agent__isnull=False, run__isnull=True, status=Message.Status.ERROR)
                .select_related("sender_agent").order_by("id"))
