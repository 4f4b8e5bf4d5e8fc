"""The event stream of a run for programs (Server-Sent Events).

A run's stream follows its whole turn: the run and the continuations that recovery chains to it,
all streaming into one reply message. Events, in order:

    run.updated      every state change of every run of the chain, from its history
    message.delta    {message_id, run_id, offset, text, part}: text or reasoning, by character offset
    message.settled  {message}: the reply as stored, the truth about its text
    end              {run}: the last run of the chain, finished
    error            {error: {code, message, fields}}: the stream cannot go on (Redis or the
                     database stayed away); reconnect with Last-Event-ID

Each event's id is `<run id>:<text chars>.<reasoning chars>.<state changes>.<settled 0/1>` — how
much of the turn the client holds after it. `Last-Event-ID` with such an id resumes exactly after
it: no gap, no repeat. A client that connects after the turn ended gets the whole reply, the
settled message and `end` at once. An id that is not this run's starts from the beginning.

While the reply streams, its text comes from the replay buffer (chats.streams), which is ahead of
the database; once settled, from the database. The buffer is read every POLL_SECONDS, the rows
every DB_EVERY polls.
"""

import asyncio
import copy
import logging
import re
import time
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections
from redis.exceptions import RedisError

from agents_app.api.payloads import run_payload
from agents_app.models import Run
from agents_app.turns import runs
from chats import events as chat_events
from chats.models import Message
from chats.streams import replay_buffer
from chats.temporary import scope as chat_scope
from hub.api.sse import KEEPALIVE, format_error, format_event

log = logging.getLogger(__name__)

POLL_SECONDS = 0.05
DB_EVERY = 4
KEEPALIVE_SECONDS = 15.0
OUTAGE_RETRY_SECONDS = 1.0  # while Redis or the database is away: a keepalive and a try this often
OUTAGE_SECONDS = 30.0  # then the stream ends with an error event and the client resumes later
SERVICE_ERRORS = (RedisError, DatabaseError)
UNAVAILABLE = "The hub lost its connection to Redis or the database; reconnect with Last-Event-ID to resume."
PARTS = ("text", "reasoning")
ID_PATTERN = re.compile(r"^([0-9a-f-]{36}):(\d+)\.(\d+)\.(\d+)\.([01])$")


@dataclass
class Position:
    """How much of the turn the client already holds."""

    sent: dict = field(default_factory=lambda: {"text": 0, "reasoning": 0})
    statuses: int = 0
    settled: bool = False

    def event_id(self, run_id) -> str:
        return f"{run_id}:{self.sent['text']}.{self.sent['reasoning']}.{self.statuses}.{int(self.settled)}"

    @classmethod
    def parse(cls, value, run_id) -> "Position":
        match = ID_PATTERN.match((value or "").strip())
        if not match or match.group(1) != str(run_id):
            return cls()
        text, reasoning, statuses, settled = (int(g) for g in match.groups()[1:])
        return cls(sent={"text": text, "reasoning": reasoning}, statuses=statuses, settled=bool(settled))


class RunFollower:
    """Turns the stored state of one run's chain into the events the client does not have yet."""

    def __init__(self, run_id, position: Position | None = None):
        self.run_id = str(run_id)
        self.position = position or Position()
        self.message_id = None  # the reply, once it streams under this chain
        self.latest_run_id = None  # unknown until the rows were read once
        self.chain: list[Run] = []  # read so far; every run but the last has ended and stays as it is
        self.streaming = False
        self.done = False
        # The chat's place (chats.temporary.scope.here()): the rows are read on other threads.
        self.place = chat_scope.here()

    def saved(self) -> dict:
        return {**self.__dict__, "chain": list(self.chain), "position": copy.deepcopy(self.position)}

    def restore(self, state: dict) -> None:
        self.__dict__.update(state)

    def _event(self, event_type: str, data: dict) -> tuple[str, dict, str]:
        return event_type, data, self.position.event_id(self.run_id)

    def _delta(self, part: str, text: str, run_id) -> list:
        have = self.position.sent[part]
        if len(text) <= have:
            return []
        piece = text[have:]
        self.position.sent[part] = len(text)
        return [self._event(chat_events.MESSAGE_DELTA, chat_events.message_delta(
            message_id=self.message_id, run_id=run_id, offset=have, text=piece, part=part))]

    def poll_buffer(self) -> list:
        """Between row reads: only the live text of a reply known to be streaming."""
        if not self.streaming or self.message_id is None:
            return []
        buffered = replay_buffer().read(self.message_id)
        out = []
        for part in PARTS:
            out += self._delta(part, buffered[part], self.latest_run_id)
        return out

    def poll_rows(self) -> list:
        """Read the chain and its reply; return the new events (the last is `end` when done)."""
        with self.place():
            return self._poll_rows()

    def _poll_rows(self) -> list:
        last = self.chain[-1].pk if self.chain else self.run_id
        chain = self.chain = self.chain[:-1] + runs.runs_from(last)
        latest = chain[-1]
        self.latest_run_id = latest.pk
        out = []
        history = [(run, entry) for run in chain for entry in (run.history or [])]
        for run, entry in history[self.position.statuses:]:
            self.position.statuses += 1
            out.append(self._event(chat_events.RUN_UPDATED, {"type": chat_events.RUN_UPDATED, "run": {
                **run_payload(run), "status": entry.get("status"), "error": entry.get("error", ""),
                "at": entry.get("at")}}))
        finished = latest.is_terminal and latest.status != Run.Status.RECOVERED
        reply_id = next((r.reply_message_id for r in reversed(chain) if r.reply_message_id), None)
        message = None
        if reply_id is not None:
            message = Message.objects.select_related("sender_agent", "sender_user").filter(pk=reply_id).first()
        ours = message is not None and message.run_id is not None and str(message.run_id) in {
            str(r.pk) for r in chain}
        self.message_id = message.pk if ours else None
        self.streaming = ours and message.status == Message.Status.STREAMING and not finished
        if ours:
            stored = {"text": message.content, "reasoning": (message.data or {}).get("reasoning", "") or ""}
            buffered = replay_buffer().read(message.pk) if self.streaming else {}
            for part in PARTS:
                live = buffered.get(part, "")
                out += self._delta(part, live if len(live) >= len(stored[part]) else stored[part], latest.pk)
        if finished:
            if ours and not self.position.settled:
                self.position.settled = True
                out.append(self._event(chat_events.MESSAGE_SETTLED, chat_events.message_settled(message)))
            self.done = True
            out.append(self._event("end", {"type": "end", "run": run_payload(latest)}))
        return out


async def stream_runs(followers: list[RunFollower], *, first: list | None = None, many: bool = False):
    """Bytes of SSE for the followers until every one has ended.

    many=False (one run's stream) ends with the run's `end`; many=True (send-and-stream) turns
    each run's end into `run.end` and ends with one `end` listing every run.

    While Redis or the database does not answer, the stream sends a keepalive after each failed
    try and tries again every OUTAGE_RETRY_SECONDS; it goes on where it was once they answer. After
    OUTAGE_SECONDS it ends with an `error` event (no id: the client's Last-Event-ID stays the last
    event it got, and resuming with it misses nothing).
    """
    for event_type, data, event_id in first or []:
        yield format_event(event_type, data, event_id=event_id)
    tick = 0
    last_sent = time.monotonic()
    outage_since = None
    while True:
        rows = tick % DB_EVERY == 0
        try:
            batch = await sync_to_async(_poll)(followers, rows)
        except SERVICE_ERRORS:
            outage_since = outage_since or time.monotonic()
            if time.monotonic() - outage_since >= OUTAGE_SECONDS:
                log.warning("a run's event stream ends: Redis or the database is away", exc_info=True)
                yield format_error("unavailable", UNAVAILABLE)
                return
            yield KEEPALIVE
            last_sent = time.monotonic()
            await asyncio.sleep(OUTAGE_RETRY_SECONDS)
            continue
        outage_since = None
        for event_type, data, event_id in batch:
            if event_type == "end" and many:
                event_type, data = "run.end", {**data, "type": "run.end"}
            yield format_event(event_type, data, event_id=event_id)
            last_sent = time.monotonic()
        if all(f.done for f in followers):
            if many:
                ended = [run_payload(f.chain[-1]) for f in followers]  # as read by the poll that ended each
                yield format_event("end", {"type": "end", "runs": ended})
            return
        if time.monotonic() - last_sent >= KEEPALIVE_SECONDS:
            yield KEEPALIVE
            last_sent = time.monotonic()
        tick += 1
        await asyncio.sleep(POLL_SECONDS)


def _poll(followers, rows: bool) -> list:
    """The new events of the followers; a poll that fails midway leaves them as they were, so the
    events it had made are made again by the next poll, not lost."""
    saved = [follower.saved() for follower in followers]
    try:
        return _poll_followers(followers, rows)
    except SERVICE_ERRORS as exc:
        for follower, state in zip(followers, saved, strict=True):
            follower.restore(state)
        if isinstance(exc, DatabaseError):
            # A database that restarted broke this thread's connection: drop it, and the next
            # poll opens another (nothing else closes connections in this thread between requests).
            close_old_connections()
        raise


def _poll_followers(followers, rows: bool) -> list:
    out = []
    for follower in followers:
        if follower.done:
            continue
        # A follower that never read its rows has no reply yet: read rows first.
        if rows or follower.latest_run_id is None:
            out += follower.poll_rows()
        else:
            out += follower.poll_buffer()
    return out


