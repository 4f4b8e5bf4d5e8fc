"""When the database or Redis does not answer: the one place that recognises it and says so.

Every entry point gives the same answer to the same failure, instead of Django's "Server Error
(500)": the API (hub.api.errors) and the chat page's JSON (chats.views.chat_json.hub_json) answer
503 in the error shape with code `unavailable` and a Retry-After; pages get a small page of their
own (templates/503.html) that needs neither the database nor a session; the chat socket answers
an error frame and stays open.

What was stored decides the answer. A write is one transaction: a failure of the database, or of
Redis while inside it (the cache: throttle counts), rolls it back, so nothing was stored and the
answer is 503 "nothing was saved, try again". A run's task goes to the broker only after its
transaction committed (agents_app.turns.runs.dispatch_on_commit), so a broker error that reaches an
entry point means the message and its queued run *were* stored; the sweeper sends the run once
the broker answers again. That answers 202 with code `saved_not_started` (never 503), so neither a
person nor a program's retry sends it twice.
"""

import logging
import sqlite3
import sys
from dataclasses import dataclass

import kombu.exceptions
import redis.exceptions
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from hub import input as hub_input
from hub.errors import HubError

log = logging.getLogger(__name__)

# What Retry-After says: long enough for a restarted service to come back, short enough that a
# person trying again soon is not kept waiting.
RETRY_AFTER_SECONDS = 5
# How many causes deep an error is searched for the service failure it was raised from.
CAUSE_DEPTH = 5
# SQLite (embedded mode) raises OperationalError for mistakes in SQL too ("no such column"): only
# these say that the database could not be used, and a mistake stays a 500 with its traceback.
SQLITE_OUTAGES = ("database is locked", "database table is locked", "unable to open database file",
                  "disk i/o error")


@dataclass(frozen=True)
class Outage:
    service: str  # "database" or "Redis": what did not answer
    stored: bool  # whether the write committed before it failed (a task not handed to the broker)


class OutageError(HubError):
    """An outage as the answer to give: its message says what happened and what to do."""

    def __init__(self, outage: Outage, *, write: bool = True):
        super().__init__(describe(outage, write=write))
        self.outage = outage


class ServiceUnavailable(OutageError):
    """The database or Redis did not answer; nothing was stored."""

    code = "unavailable"
    status = 503


class SavedNotStarted(OutageError):
    """Stored, but its run's task could not be handed to the broker: it starts once Redis is back."""

    code = "saved_not_started"
    status = 202


DATABASE_ERRORS = (OperationalError, InterfaceError)
# The cache, the channel layer (channels-redis) and the replay buffers all raise redis-py's.
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# What a task send raises when the broker does not answer.
BROKER_ERRORS = (kombu.exceptions.OperationalError,)


def _database_outage(exc: BaseException) -> bool:
    if not isinstance(exc, DATABASE_ERRORS):
        return False
    if isinstance(exc.__cause__, sqlite3.Error):
        return any(words in str(exc).lower() for words in SQLITE_OUTAGES)
    return True


def outage_of(exc: BaseException) -> Outage | None:
    """The outage exc reports (itself, or an error it was raised from), or None for any other error."""
    for _ in range(CAUSE_DEPTH):
        if exc is None:
            return None
        if isinstance(exc, BROKER_ERRORS):
            return Outage(service="Redis", stored=True)
        if _database_outage(exc):
            return Outage(service="database", stored=False)
        if isinstance(exc, REDIS_ERRORS):
            return Outage(service="Redis", stored=False)
        exc = exc.__cause__
    return None


def _where(outage: Outage) -> str:
    return "its database" if outage.service == "database" else "Redis"


def describe(outage: Outage, *, write: bool = True) -> str:
    """What happened, in a sentence a user can act on (write: the request meant to change something)."""
    where = _where(outage)
    if outage.stored:
        return (f"Saved, but Hub can't reach {where} to hand it to a worker; it starts on its own once "
                f"{outage.service} is back. Don't send it again.")
    if write:
        return f"Hub can't reach {where} right now, so nothing was saved. Try again in a moment."
    return f"Hub can't reach {where} right now. Try again in a moment."


def as_hub_error(exc: BaseException, *, write: bool = True) -> OutageError | None:
    """The answer to give for exc when it is an outage (None otherwise); logs it once.

    write: the request meant to store something (its answer says whether it was stored)."""
    outage = outage_of(exc)
    if outage is None:
        return None
    # One line: the error's own text names a host and port at most, never a password.
    log.warning("%s did not answer (%s: %s)", outage.service, type(exc).__name__, (str(exc).splitlines() or [""])[0])
    return SavedNotStarted(outage) if outage.stored else ServiceUnavailable(outage, write=write)


def is_write(request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS")


def answer_headers(error: OutageError) -> dict:
    headers = {"Cache-Control": "no-store"}
    if isinstance(error, ServiceUnavailable):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return headers


def json_answer(error: OutageError) -> JsonResponse:
    return JsonResponse(error.as_dict(), status=error.status, headers=answer_headers(error))


def page_answer(request, error: OutageError) -> HttpResponse:
    """The page that says so. Rendered without the request: no context processor runs, so neither
    the session nor the user is read (the database may be what is down)."""
    outage = error.outage
    html = render_to_string("503.html", {
        "service": outage.service, "stored": outage.stored, "submitted": request.method == "POST",
        "where": _where(outage), "retry_after": RETRY_AFTER_SECONDS,
    })
    return HttpResponse(html, status=error.status, headers=answer_headers(error))


def answer(request, exc: BaseException) -> HttpResponse | None:
    """The answer for an outage, JSON or a page as the request wants; None for any other error."""
    error = as_hub_error(exc, write=is_write(request))
    if error is None:
        return None
    return json_answer(error) if hub_input.wants_json(request) else page_answer(request, error)


def server_error(request):
    """handler500: an outage raised outside a view (a middleware reading the session) answers as
    one raised in a view does; any other error gets Django's own 500 page."""
    exc = sys.exception()
    response = answer(request, exc) if exc is not None else None
    return response or defaults.server_error(request)
