"""The optional monthly token limit per user (HUB_MONTHLY_TOKENS): once a user's tokens this
calendar month (UTC) reach it, no new turn of theirs starts until the month ends. A turn already
running finishes. The check is one indexed query (run_owner_finished), made only when the limit
is set."""

import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F, Subquery, Sum
from django.utils import timezone

from agents_app.models import Run, TemporaryChatUsage
from chats.temporary import scope as chat_scope
from hub.errors import HubError


class TokenLimitReached(HubError):
    """The user's tokens this month reached HUB_MONTHLY_TOKENS: no new turn starts."""

    code = "token_limit_reached"
    status = 429


def monthly_limit() -> int:
    """The tokens a user may use in a calendar month; 0 is no limit."""
    return max(0, int(settings.HUB_MONTHLY_TOKENS or 0))


def month_bounds(now: datetime.datetime | None = None) -> tuple[datetime.datetime, datetime.datetime]:
    """The start of this calendar month (UTC) and of the next."""
    now = (now or timezone.now()).astimezone(datetime.UTC)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (start + datetime.timedelta(days=32)).replace(day=1)
    return start, following


def tokens_between(*, owner_id, start, end=None) -> int:
    """The user's tokens (in and out) in runs that finished from start (to end), temporary chats'
    included: one query on the hub's database (two indexed sums), also from inside a temporary chat."""

    def summed(model):
        rows = model.objects.filter(owner_id=owner_id, finished_at__gte=start)
        if end is not None:
            rows = rows.filter(finished_at__lt=end)
        return Subquery(rows.order_by().values("owner_id").annotate(total=Sum(F("input_tokens") + F("output_tokens")))
                        .values("total"))

    with chat_scope.outside():
        stored, temporary = get_user_model().objects.filter(pk=owner_id).values_list(
            summed(Run), summed(TemporaryChatUsage)).first() or (0, 0)
    return int(stored or 0) + int(temporary or 0)


def limit_status(*, owner_id, now=None) -> dict:
    """{monthly_tokens, used, left, reached, resets_on}; monthly_tokens None (and no query) when
    there is no limit."""
    limit = monthly_limit()
    start, following = month_bounds(now)
    if not limit:
        return {"monthly_tokens": None, "used": None, "left": None, "reached": False,
                "resets_on": following.date().isoformat()}
    used = tokens_between(owner_id=owner_id, start=start)
    return {"monthly_tokens": limit, "used": used, "left": max(0, limit - used), "reached": used >= limit,
            "resets_on": following.date().isoformat()}


def limit_message(status: dict) -> str:
    """What the user reads when the limit stops a turn."""
    resets = datetime.date.fromisoformat(status["resets_on"])
    return (f"Monthly token limit reached: {status['used']:,} of {status['monthly_tokens']:,} tokens used; "
            f"it resets on {resets.day} {resets:%B}.")


def reached(*, owner_id) -> dict | None:
    """The limit's status when the user's tokens this month reached it, else None. No query when
    there is no limit."""
    if not monthly_limit():
        return None
    status = limit_status(owner_id=owner_id)
    return status if status["reached"] else None


def check_can_start(*, owner_id) -> None:
    """Raise TokenLimitReached (with the message the user reads) when the limit is reached."""
    status = reached(owner_id=owner_id)
    if status is not None:
        raise TokenLimitReached(limit_message(status))
