"""A temporary chat's runs live in the chat's image, not in the hub's database: their tokens are
kept in the hub's database (TemporaryChatUsage) so the user's usage and monthly limit count them,
whether the chat is saved later or expires."""

from django.utils import timezone

from agents_app.models import TemporaryChatUsage
from chats.temporary import scope as chat_scope


def in_temporary_chat() -> bool:
    """Whether this code runs on a temporary chat's image."""
    return chat_scope.current() is not None


def record(*, run, usage: dict) -> None:
    """Keep the tokens a temporary chat's run spent, once per run (one insert in the hub's database)."""
    inputs, outputs = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if not inputs and not outputs:
        return
    row = TemporaryChatUsage(run_id=run.pk, owner_id=run.owner_id, agent_id=run.agent_id, finished_at=timezone.now(),
                             model=str(usage.get("model") or "")[:200], input_tokens=inputs, output_tokens=outputs)
    with chat_scope.outside():
        TemporaryChatUsage.objects.bulk_create([row], ignore_conflicts=True)


def _count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0
