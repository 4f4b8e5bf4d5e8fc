"""A user's tokens by agent and by day over a period (the Usage page, GET /api/v1/usage/), and
every user's for staff (the admin's Usage page). Each is a few grouped sums over the run rows'
token columns, read through the index on (owner, finished_at)."""

import datetime
import re
from dataclasses import dataclass

from django.db.models import Count, F, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from agents_app.models import Run, TemporaryChatUsage
from agents_app.usage.limit import limit_status, month_bounds
from hub.errors import InvalidInput

DEFAULT_DAYS = 30
MAX_DAYS = 366
MONTH = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True)
class Period:
    start: datetime.datetime  # inclusive, UTC midnight
    end: datetime.datetime  # exclusive
    days: int | None = None  # "the last N days" (today included)
    month: str | None = None  # "YYYY-MM"

    def as_dict(self) -> dict:
        return {"days": self.days, "month": self.month, "start": self.start.date().isoformat(),
                "end": (self.end - datetime.timedelta(days=1)).date().isoformat()}

    def dates(self) -> list[datetime.date]:
        first, last = self.start.date(), (self.end - datetime.timedelta(days=1)).date()
        return [first + datetime.timedelta(days=n) for n in range((last - first).days + 1)]


def period_from(*, days=None, month=None, now=None) -> Period:
    """The period a request names: ?month=YYYY-MM (a calendar month, UTC) or ?days=N (the last N
    days, today included; 30 unless given). Raises InvalidInput naming the field."""
    today = (now or timezone.now()).astimezone(datetime.UTC).replace(
        hour=0, minute=0, second=0, microsecond=0)
    if month not in (None, ""):
        if days not in (None, ""):
            raise InvalidInput.for_field("month", "give either month or days, not both")
        match = MONTH.match(str(month))
        if not match or not 1 <= int(match[2]) <= 12 or int(match[1]) < 1970:
            raise InvalidInput.for_field("month", "must be a month as YYYY-MM, e.g. 2026-01")
        start = today.replace(year=int(match[1]), month=int(match[2]), day=1)
        return Period(start=start, end=month_bounds(start)[1], month=str(month))
    if days in (None, ""):
        days = DEFAULT_DAYS
    try:
        days = int(days)
    except (TypeError, ValueError):
        raise InvalidInput.for_field("days", f"must be a whole number from 1 to {MAX_DAYS}") from None
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput.for_field("days", f"must be a whole number from 1 to {MAX_DAYS}")
    start = today - datetime.timedelta(days=days - 1)
    return Period(start=start, end=today + datetime.timedelta(days=1), days=days)


def _sums(rows):
    return rows.annotate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), runs=Count("id"))


def _counted(row: dict) -> dict:
    inputs, outputs = int(row.get("input_tokens") or 0), int(row.get("output_tokens") or 0)
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs,
            "runs": int(row.get("runs") or 0)}


def _runs_in(period: Period, owner_id=None) -> list:
    """The stored runs and the temporary chats' usage that finished in the period (two sources,
    summed alike)."""
    sources = []
    for model in (Run, TemporaryChatUsage):
        rows = model.objects.filter(finished_at__gte=period.start, finished_at__lt=period.end)
        rows = rows.filter(owner_id=owner_id) if owner_id is not None else rows.filter(owner__isnull=False)
        sources.append(rows.order_by())
    return sources


def _merged(sources, *keys: str, **named) -> list[dict]:
    """The grouped sums of every source, one row per key (the sources' rows for a key added)."""
    merged: dict[tuple, dict] = {}
    for rows in sources:
        for row in _sums(rows.values(*keys, **named)):
            key = tuple(row[name] for name in (*keys, *named))
            held = merged.setdefault(key, {**row, "input_tokens": 0, "output_tokens": 0, "runs": 0})
            for count in ("input_tokens", "output_tokens", "runs"):
                held[count] += int(row[count] or 0)
    return list(merged.values())


def _by_day(sources, period: Period) -> list[dict]:
    summed = {row["day"]: row for row in _merged(
        [rows.annotate(day=TruncDate("finished_at", tzinfo=datetime.UTC)) for rows in sources], "day")}
    return [{"date": day.isoformat(), **_counted(summed.get(day, {}))} for day in period.dates()]


def _by_agent(sources) -> list[dict]:
    rows = _merged(sources, "agent_id", agent_name=F("agent__name"), agent_model=F("agent__model"))
    agents = [{"agent_id": row["agent_id"], "agent_name": row["agent_name"], "agent_model": row["agent_model"],
               **_counted(row)} for row in rows]
    return sorted(agents, key=lambda row: (-row["total_tokens"], row["agent_name"].lower()))


def _totals(rows: list[dict]) -> dict:
    return _counted({key: sum(row[key] for row in rows) for key in ("input_tokens", "output_tokens", "runs")})


def usage_for_user(*, user, period: Period) -> dict:
    """The user's own tokens in the period, by agent and by day (every day, zeros too), with the
    totals and the monthly limit's status. Another user's runs are never read."""
    runs = _runs_in(period, owner_id=user.pk)
    by_agent = _by_agent(runs)
    return {"period": period.as_dict(), "totals": _totals(by_agent), "by_agent": by_agent,
            "by_day": _by_day(runs, period), "limit": limit_status(owner_id=user.pk)}


def usage_for_staff(*, period: Period) -> dict:
    """Every user's tokens in the period: by user, by user and agent, and by day."""
    runs = _runs_in(period)
    by_user = sorted(
        ({"user_id": row["owner_id"], "username": row["username"], **_counted(row)}
         for row in _merged(runs, "owner_id", username=F("owner__username"))),
        key=lambda row: (-row["total_tokens"], row["username"].lower()))
    by_agent = sorted(
        ({"username": row["username"], "agent_id": row["agent_id"], "agent_name": row["agent_name"], **_counted(row)}
         for row in _merged(runs, "owner_id", "agent_id", username=F("owner__username"), agent_name=F("agent__name"))),
        key=lambda row: (-row["total_tokens"], row["username"].lower(), row["agent_name"].lower()))
    return {"period": period.as_dict(), "totals": _totals(by_user), "by_user": by_user, "by_agent": by_agent,
            "by_day": _by_day(runs, period)}


def period_choices(now=None) -> list[dict]:
    """The periods the Usage page offers: the last 7 and 30 days, this month and the one before."""
    this_month = month_bounds(now)[0]
    last_month = month_bounds(this_month - datetime.timedelta(days=1))[0]
    return [{"label": "Last 7 days", "query": "days=7", "days": 7, "month": None},
            {"label": "Last 30 days", "query": "days=30", "days": 30, "month": None},
            {"label": "This month", "query": f"month={this_month:%Y-%m}", "days": None, "month": f"{this_month:%Y-%m}"},
            {"label": f"{last_month:%B}", "query": f"month={last_month:%Y-%m}", "days": None,
             "month": f"{last_month:%Y-%m}"}]


def day_chart(by_day: list[dict]) -> dict:
    """Bars for the days (an SVG's coordinates: one unit a day, heights out of 100 of the busiest)."""
    peak = max((day["total_tokens"] for day in by_day), default=0)
    bars = []
    for index, day in enumerate(by_day):
        height = round(100 * day["total_tokens"] / peak, 2) if peak else 0
        if day["total_tokens"] and height < 1:
            height = 1  # a day with any use shows
        bars.append({"x": index + 0.1, "y": round(100 - height, 2), "height": height, "date": day["date"],
                     "total": day["total_tokens"]})
    return {"width": len(by_day), "bars": bars}
