"""One agent turn in a worker: build the input, stream the model, checkpoint, finish.

The model runs on the process's model loop (agents_app.turns.modelloop), which also sends its deltas,
coalesced over at most 50 ms, to the replay buffer and the chat's tabs. This (the Celery task's)
thread owns the database: it writes the checkpoint (at most every 250 ms, less often when many
turns stream) under the lease, heartbeats, stops on a live cancel the loop saw and watches for a
stalled stream. Events that need the database (a tool call's history, a remote tool's result)
and the model's end reach it through a queue.

A database that goes away (a restart, a failover) is waited out: each of the turn's writes is
tried again on a fresh connection while the lease surely holds, and the model streams on into the
replay buffer meanwhile. A turn that could not write by then gives up: it stops its model at
once, puts the replay buffer back to its last checkpoint and leaves the run to recovery, which
continues from that checkpoint. However the turn's thread ends, its model is stopped with it.
"""

import asyncio
import concurrent.futures
import functools
import logging
import queue
import threading
import time

from django.conf import settings
from django.db import transaction
from pydantic_ai import Agent as ModelAgent
from pydantic_ai import RunContext
from pydantic_ai.direct import model_request_stream
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolReturnPart,
    UserPromptPart,
)

from agents_app import continuations, providers, remotes, titles, tools
from agents_app.models import Run
from agents_app.scripted import CONTINUE_PROMPT
from agents_app.turns import delegation, recovery, runs
from agents_app.turns import files as turn_files
from agents_app.turns.inputs import conversation_messages, thread_messages_of, trigger_prompt, turn_instructions
from agents_app.turns.modelloop import ModelLoop, model_loop
from agents_app.usage import temporary as temporary_usage
from chats import events
from chats import services as chat_services
from chats.models import Message
from chats.streams import replay_buffer
from chats.temporary import scope as chat_scope
from hub.prepared import PreparedRead

log = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 0.25  # between a turn's checkpoints while few turns stream (checkpoint_interval)
STOP_MODEL_SECONDS = 5
# A turn whose writes fail (no database) tries them again until this share of its lease has gone
# since it last renewed it; then it gives the run up. The rest of the lease is its time to stop
# its model and put the replay buffer back before recovery may take the run over.
LEASE_SHARE_BEFORE_GIVING_UP = 5 / 6
# The database work at a turn's start and end (claim and load; prepare; settle) runs for at most
# HUB_TURN_STARTS_AT_ONCE turns of a worker process at a time. It is Python holding the GIL in
# bursts of milliseconds; with fifty task threads at it during a burst of new turns, the model
# loop that streams every turn of the process waited several GIL switch intervals after each
# Redis call, and its deltas went out late (docs/decisions.md). A thread waiting here holds no GIL.
# None of this work waits on another turn, so the limit cannot deadlock.
TURN_BOOKKEEPING = threading.BoundedSemaphore(settings.HUB_TURN_STARTS_AT_ONCE)


# --- The turn -------------------------------------------------------------------------------

class Turn:
    def __init__(self, run: Run, token, *, lease_from: float | None = None):
        self.run = run
        self.token = token
        # When the lease was last set (time.monotonic(), at the latest): by the claim, then by
        # each heartbeat. A turn that cannot write gives up before it could have run out.
        self.lease_from = time.monotonic() if lease_from is None else lease_from
        checkpoint = run.checkpoint or {}
        self.checkpointed = checkpoint  # the stored text (and more) a recovery would continue from
        self._start_tries = 0
        self.text = {"text": checkpoint.get("text", ""), "reasoning": checkpoint.get("reasoning", "")}
        # Streamed but not yet sent, per part: written by the model on the model loop, taken by
        # its relay (or, once the model has ended, by this thread).
        self.pending = {"text": [], "reasoning": []}
        self.pending_since = None  # time.time() when the oldest of them came from the model
        self.model_progress_at = time.monotonic()
        self.history_json = checkpoint.get("history")
        self.history_text_len = checkpoint.get("history_text_len", 0)
        self.events: queue.Queue = queue.Queue()
        self.loop = None
        self.task = None
        self.model_run: concurrent.futures.Future | None = None
        self.cancel_seen = False
        self.stats = {"deltas": 0, "checkpoints": 0}
        self.deps = None
        self.message = None
        self.instructions = checkpoint.get("instructions")
        # The tokens the provider reported for this run's requests that finished, before its model
        # ends (a checkpoint keeps them: a run that recovery ends records them). A continuation's
        # checkpoint holds none of the run it continues: that one recorded its own.
        self.usage_so_far: dict = {}
        self._thread_messages: list[Message] | None = None

    def thread_messages(self) -> list[Message]:
        """Every message of the turn's thread, read once for its conversation, notes and remotes."""
        if self._thread_messages is None:
            self._thread_messages = thread_messages_of(self.run)
        return self._thread_messages

    # Preparation ------------------------------------------------------------------------
    def prepare(self) -> None:
        run = self.run
        with events.batched(), transaction.atomic():
            if run.reply_message_id:
                self.message = chat_services.resume_reply(
                    message=run.reply_message, run=run, content=self.text["text"], reasoning=self.text["reasoning"]
                )
            else:
                self.message = chat_services.start_reply(
                    chat=run.chat, agent=run.agent, thread=run.thread, run=run
                )
            if not Run.objects.filter(pk=run.pk, lease_token=self.token).update(reply_message=self.message):
                raise tools.LeaseLost(run.pk)
            run.reply_message = self.message
            events.broadcast_on_commit(events.chat_group(run.chat_id), events.run_updated(run))
        replay_buffer().reset(self.message.pk, self.text)
        if self.instructions is None:  # a continuation keeps the turn's frozen instructions
            self.instructions = turn_instructions(run, self.thread_messages())
        self.deps = tools.TurnDeps(
            run_id=str(run.pk), token=self.token, owner_id=run.chat.owner_id, chat_id=str(run.chat_id),
            thread_id=run.thread_id, agent_id=run.agent_id, reply_message_id=self.message.pk,
            trigger_message_id=run.trigger_message_id,
            steps=dict((run.checkpoint or {}).get("tool_steps", {})),
            progress=lambda event: self.note_progress(),
            delegate=delegation.ask,
            place=chat_scope.here(),
        )

    # A continuation's text start, held until it is known not to repeat the partial text.
    continuation_text: continuations.ContinuationText | None = None

    def model_input(self):
        """(prompt, history) for a fresh turn, or for a continuation from the checkpoint."""
        run = self.run
        if self.history_json:
            history = ModelMessagesTypeAdapter.validate_python(turn_files.with_image_data(self.history_json))
            last = history[-1] if history else None
            if isinstance(last, ModelResponse) and last.tool_calls:
                if any(c.tool_name not in tools.REGISTRY and c.tool_call_id not in self.deps.steps
                       for c in last.tool_calls):
                    # A remote's call that never finished: let the model ask for it again.
                    history.pop()
                else:
                    history.append(ModelRequest(parts=[self._replayed_return(call) for call in last.tool_calls]))
            after = self.text["text"][self.history_text_len:]
            if after:
                history.append(ModelResponse(parts=[TextPart(content=after)]))
                self._expect_continuation(starts=(self.history_text_len,))
                return CONTINUE_PROMPT, history
            return None, history
        thread_files = turn_files.ThreadFiles(run, self.thread_messages())
        history = conversation_messages(run, self.thread_messages(), thread_files)
        prompt = trigger_prompt(run, thread_files)
        if self.text["text"]:
            history += [ModelRequest(parts=[UserPromptPart(content=prompt)]),
                        ModelResponse(parts=[TextPart(content=self.text["text"])])]
            self._expect_continuation()
            return CONTINUE_PROMPT, history
        return prompt, history

    def _expect_continuation(self, starts: tuple[int, ...] = ()) -> None:
        """A language model may repeat the partial text or leave out the space after it: its text
        is joined on through continuations.ContinuationText. Hub's own models send just the rest."""
        mode = continuations.mode_for(self.run.agent)
        if mode != continuations.EXACT:
            self.continuation_text = continuations.ContinuationText(
                self.text["text"], prefix=mode == continuations.PREFIX, starts=starts)

    def _replayed_return(self, call):
        """A finished step comes from the checkpoint; an unfinished one is run now, once."""
        fn = tools.REGISTRY.get(call.tool_name)
        if call.tool_call_id in self.deps.steps or fn is None:
            result = self.deps.steps.get(call.tool_call_id, {}).get("result", "unknown tool")
        else:
            result = tools.run_step(self.deps, call_id=call.tool_call_id, name=call.tool_name,
                                    args=call.args_as_dict(), fn=fn)
        return ToolReturnPart(tool_name=call.tool_name, content=result, tool_call_id=call.tool_call_id)

    def build_agent(self, model, toolsets, tool_names) -> ModelAgent:
        # Once the reply has text, an answer with none is the model saying it has nothing to add
        # (a continuation of a reply whose last words were kept): the reply stands as it is,
        # where with `str` alone pydantic-ai would ask again and then fail the turn.
        output_type = str | None if self._reply_has_text() else str
        model_agent = ModelAgent(model, output_type=output_type, deps_type=tools.TurnDeps,
                                 instructions=self.instructions or None, toolsets=toolsets)
        for name in tool_names:
            fn = tools.REGISTRY[name]
            model_agent.tool(name=name, description=fn.__doc__)(_tool_entry(name, fn))
        return model_agent

    # The model, on the process's model loop -----------------------------------------------
    def start_model(self, prompt, history) -> None:
        agent = self.run.agent
        relay = model_loop()
        model = providers.build_model(agent, owner_id=self.run.chat.owner_id, http_client=relay.http_client)
        agent_settings = agent.settings or {}
        model_settings = {k: agent_settings[k] for k in ("temperature", "max_tokens") if k in agent_settings} or None
        # The thread's remotes are tools, never conversation text.
        toolsets = remotes.toolsets_for(remotes.remotes_for_thread(chat=self.run.chat, messages=self.thread_messages()))
        tool_names = [name for name in agent.tools or [] if name in tools.REGISTRY]
        if toolsets or tool_names or self.history_json:
            model_run = functools.partial(self._run_agent, self.build_agent(model, toolsets, tool_names),
                                          prompt, history, model_settings)
        else:
            model_run = functools.partial(self._request_once, model, prompt, history, model_settings)

        async def main():
            self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()
            continuations.joining.set(self.continuation_text)  # this task's: told if a prefix is refused
            relay.turns.add(self)
            outcome = ("cancelled", None)
            try:
                outcome = ("done", await model_run())
            except asyncio.CancelledError:
                pass
            except BaseException as exc:  # everything the model or a tool raised ends the turn
                outcome = ("error", exc)
            finally:
                relay.turns.discard(self)
                if outcome[0] != "cancelled":
                    self._release_held_text()
                    relay.flush([self])  # the last words go out before the turn settles
                self.events.put(outcome)

        self.model_run = relay.submit(main())

    async def _run_agent(self, model_agent: ModelAgent, prompt, history, model_settings) -> dict:
        """A turn whose model may call tools: pydantic-ai's agent runs the loop of requests and
        tool calls. Returns the usage."""
        async def handler(ctx: RunContext, stream):
            async for event in stream:
                self._on_model_event(ctx, event)

        result = await model_agent.run(prompt, message_history=history, deps=self.deps,
                                       event_stream_handler=handler, model_settings=model_settings)
        return _usage_dict(result.usage, _last_model_name(result.new_messages()))

    async def _request_once(self, model, prompt, history, model_settings) -> dict:
        """A turn without tools is one streamed request, made through pydantic-ai's direct API: the
        agent's run would cost about twenty times the CPU to start and four times per piece, for a
        loop with nothing to loop over (docs/decisions.md). Returns the usage.

        A reply without text (empty, or calling a tool it was not offered) gets what the agent's
        run would give it: the agent tells the model and asks again. That happens only while
        nothing of it was shown; a reply that streamed thinking and no text fails, as the agent's
        run would once its one retry was spent. A continuation may answer nothing: the worker
        died after the reply's last words were kept, so the reply is whole as it stands.
        """
        continuing = self._reply_has_text()
        thought_before = self._reasoning_streamed()
        messages = _with_prompt(history, prompt, self.instructions)
        async with model_request_stream(model, messages, model_settings=model_settings) as stream:
            async for event in stream:
                self._on_model_event(None, event)
        first = _usage_dict(stream.usage, stream.model_name)
        if continuing or any(isinstance(part, TextPart) and part.content for part in stream.get().parts):
            return first
        self.usage_so_far = first  # asked again below: the first answer's tokens were spent too
        if self._reasoning_streamed() != thought_before:
            raise UnexpectedModelBehavior("the reply held no text")
        again = await self._run_agent(self.build_agent(model, [], []), prompt, history, model_settings)
        return added_usage(first, again)

    def _reply_has_text(self) -> bool:
        """Whether the reply already holds text: a continuation, once the model is asked."""
        return bool(self.text["text"])

    def _reasoning_streamed(self) -> int:
        """On the model loop: how much thinking the turn has streamed, sent or not."""
        return len(self.text["reasoning"]) + sum(map(len, self.pending["reasoning"]))

    def note_progress(self) -> None:
        self.model_progress_at = time.monotonic()

    def _on_model_event(self, ctx, event) -> None:
        """On the model loop."""
        self.model_progress_at = time.monotonic()  # any event is progress (tool arguments too)
        if isinstance(event, PartStartEvent):
            if isinstance(event.part, TextPart) and event.part.content:
                self._append_text(event.part.content)
            elif isinstance(event.part, ThinkingPart) and event.part.content:
                self._pend("reasoning", event.part.content)
        elif isinstance(event, PartDeltaEvent):
            if isinstance(event.delta, TextPartDelta) and event.delta.content_delta:
                self._append_text(event.delta.content_delta)
            elif isinstance(event.delta, ThinkingPartDelta) and event.delta.content_delta:
                self._pend("reasoning", event.delta.content_delta)
        elif isinstance(event, FunctionToolCallEvent):
            self._release_held_text()
            model_loop().flush([self])  # the text before the tool call goes out (and is kept) first
            history = turn_files.without_image_data(ModelMessagesTypeAdapter.dump_python(ctx.messages, mode="json"))
            usage = _usage_dict(ctx.usage, _last_model_name(ctx.messages))
            self.events.put(("history", (history, len(self.text["text"]), usage)))
        elif isinstance(event, FunctionToolResultEvent) and event.part.tool_name not in tools.REGISTRY:
            self.events.put(("remote_step", (event.part.tool_call_id, event.part.tool_name, event.part.content)))

    def _append_text(self, text: str) -> None:
        """On the model loop: streamed text, the start of a continuation's only once it is known
        whether it repeats the partial text."""
        if self.continuation_text is not None:
            text = self.continuation_text.feed(text)
        if text:
            self._pend("text", text)

    def _pend(self, part: str, text: str) -> None:
        """On the model loop: text to send; the relay is woken by the first since it last took any."""
        if self.pending_since is None:
            self.pending_since = time.time()
            model_loop().wake()
        self.pending[part].append(text)

    def _release_held_text(self) -> None:
        """On the model loop: a continuation's start still held when its text ends, without a repeat."""
        if self.continuation_text is not None:
            rest = self.continuation_text.end()
            if rest:
                self._pend("text", rest)

    def record_remote_step(self, call_id: str, name: str, result) -> None:
        """A remote (MCP) tool's result, kept like a Hub tool step so a continuation replays it."""
        import json

        try:
            json.dumps(result)
        except TypeError:
            result = str(result)
        with transaction.atomic():
            self.deps.steps[call_id] = tools._record_step(self.deps, call_id=call_id, name=name, args={},
                                                          result=result)

    def abort_model(self) -> None:
        if self.loop is not None and self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        elif self.model_run is not None:
            self.model_run.cancel()  # not started on the loop yet

    # The pump ---------------------------------------------------------------------------
    def take_pending(self):
        """What was streamed since the last call, as (message id, chat id, chunks, delta events),
        counted as sent; None if nothing was. Only the model loop calls it while the model runs."""
        chunks = {part: "".join(items) for part, items in self.pending.items() if items}
        if not chunks:
            return None
        deltas, sent_at, model_at = [], time.time(), self.pending_since
        self.pending_since = None
        for part, text in chunks.items():
            deltas.append(events.message_delta(message_id=self.message.pk, run_id=self.run.pk,
                                               offset=len(self.text[part]), text=text, part=part,
                                               model_at=model_at, sent_at=sent_at))
            self.text[part] += text
            self.pending[part] = []
            self.stats["deltas"] += 1
        return self.message.pk, self.run.chat_id, chunks, deltas

    def checkpoint(self) -> bool:
        """Store the text sent so far (the replay buffer is never behind the checkpoint)."""
        data = {
            "text": self.text["text"], "reasoning": self.text["reasoning"],
            "history": self.history_json, "history_text_len": self.history_text_len,
            "instructions": self.instructions,
            "usage": self.usage_so_far if providers.spends_tokens(self.run.agent) else {},
        }  # the tool steps stay as the tool wrapper stored them
        # The counts go with the checkpoint write itself (this one included): no extra write.
        if not runs.save_checkpoint(self.run.pk, self.token, data,
                                    counts={**self.stats, "checkpoints": self.stats["checkpoints"] + 1},
                                    reply=(self.message.pk, self.text["text"], self.text["reasoning"],
                                           self.message.data)):
            return False
        self.stats["checkpoints"] += 1
        self.checkpointed = data
        return True

    def pump(self) -> tuple[str, object]:
        """Checkpoint, heartbeat and watch until the model ends; returns (outcome, payload)."""
        now = time.monotonic()
        last_checkpoint = last_heartbeat = now
        checkpointed_deltas = self.stats["deltas"]
        history_changed = False
        heartbeat_every = max(1.0, settings.HUB_LEASE_SECONDS / 3)
        while True:
            every = checkpoint_interval()
            wait = last_checkpoint + every - time.monotonic()
            try:
                kind, payload = self.events.get(timeout=max(0.0, wait))
            except queue.Empty:
                kind, payload = None, None
            now = time.monotonic()
            if kind == "history":
                self.history_json, self.history_text_len, self.usage_so_far = payload
                history_changed = True
            elif kind == "remote_step":
                try:
                    self.write(self.record_remote_step, *payload)
                except tools.LeaseLost:
                    return "lease_lost", None
            elif kind in ("done", "error", "cancelled"):
                return kind, payload
            dirty = history_changed or self.stats["deltas"] != checkpointed_deltas
            if dirty and now - last_checkpoint >= every:
                sent = self.stats["deltas"]
                if not self.write(self.checkpoint):
                    return "lease_lost", None
                checkpointed_deltas, history_changed = sent, False
                last_checkpoint = now
            elif now - last_checkpoint >= every:
                last_checkpoint = now  # nothing new: the timer starts over
            if now - last_heartbeat >= heartbeat_every:
                if not self.write(self.renew_lease):
                    return "lease_lost", None
                last_heartbeat = now
            if self.cancel_seen:  # the model loop looks for cancels
                return "cancel", None
            if now - self.model_progress_at >= settings.HUB_STALL_SECONDS:
                return "stalled", None

    # Endings ----------------------------------------------------------------------------
    def settle(self, *, run_status: str, message_status: str, error: str = "", usage=None) -> bool:
        """End the run and its reply in one transaction. usage is what the model reported when it
        ended (None: it did not, and this run's requests that finished count). The reply adds the
        run's tokens to those it holds (chats.services.settle_reply)."""
        ModelLoop.flush([self])  # what a cancelled model left pending (the model has ended)
        run_usage = self.usage_so_far if usage is None else usage
        counted = providers.spends_tokens(self.run.agent)
        temporary = temporary_usage.in_temporary_chat()  # the run's row is in the chat's image
        with TURN_BOOKKEEPING, events.batched(), transaction.atomic():
            if not runs.finish(self.run.pk, self.token, run_status, error=error, usage=run_usage,
                               counts=self.stats, counted=counted and not temporary):
                return False
            if counted and temporary:
                temporary_usage.record(run=self.run, usage=run_usage)
            chat_services.settle_reply(
                message=self.message, status=message_status, content=self.text["text"],
                reasoning=self.text["reasoning"], error=error, usage=(run_usage or None) if counted else None,
            )
            self.run.status = run_status
            self.run.error = error
            events.broadcast_on_commit(events.chat_group(self.run.chat_id), events.run_updated(self.run))
            if counted:
                events.broadcast_on_commit(events.user_group(self.run.chat.owner_id), events.usage_updated())
            if run_status == Run.Status.SUCCEEDED:
                titles.queue_title_after_reply(self.message)
        replay_buffer().clear(self.message.pk)
        return True

    def stop_model(self) -> None:
        self.abort_model()
        if self.model_run is not None:
            concurrent.futures.wait([self.model_run], timeout=STOP_MODEL_SECONDS)

    def execute(self) -> str:
        """Run the turn to its end; returns how it ended.

        However this thread leaves (an error escaping, the thread killed), the model stops with
        it: nothing may stream on that no checkpoint or settle of this turn will ever store.
        """
        try:
            return self._execute()
        except runs.DatabaseLost:
            return self.give_up()
        finally:
            if self.model_run is not None and not self.model_run.done():
                self.stop_model()

    def _execute(self) -> str:
        try:
            prompt, history = self.write(self.prepared_input)
        except tools.LeaseLost:
            return "lease_lost"
        except runs.DatabaseLost:
            raise
        except Exception as exc:
            log.exception("run %s could not start", self.run.pk)
            if self.message is None:
                self.write(runs.finish, self.run.pk, self.token, Run.Status.FAILED,
                           error=providers.readable_error(exc))
            else:
                self.write(self.settle, run_status=Run.Status.FAILED, message_status=Message.Status.ERROR,
                           error=providers.readable_error(exc))
            return "failed"
        self.start_model(prompt, history)
        outcome, payload = self.pump()
        if outcome == "done":
            self.write(self.settle, run_status=Run.Status.SUCCEEDED, message_status=Message.Status.FINAL,
                       usage=payload)
            return "succeeded"
        if outcome == "error":
            if isinstance(payload, tools.LeaseLost):
                return "lease_lost"
            if isinstance(payload, runs.CONNECTION_ERRORS):
                # A tool's write lost the database: the reply is not at fault, so recovery goes
                # on from the checkpoint (the steps that committed are replayed, not run again).
                return self.hand_over(reason="database lost", outcome="database_lost")
            log.warning("run %s failed: %r", self.run.pk, payload)
            self.write(self.settle, run_status=Run.Status.FAILED, message_status=Message.Status.ERROR,
                       error=providers.readable_error(payload))
            return "failed"
        self.stop_model()
        if outcome in ("cancel", "cancelled"):
            self.write(self.settle, run_status=Run.Status.CANCELLED, message_status=Message.Status.CANCELLED)
            return "cancelled"
        if outcome == "stalled":
            return self.hand_over(reason="stalled", outcome="stalled")
        return "lease_lost"

    def prepared_input(self):
        """prepare() then model_input(), as one step a lost database makes the turn try again."""
        self._start_tries += 1
        if self._start_tries > 1 and self.message is None:
            # The reply the failed try made may have been stored all the same: hand that one over
            # rather than start a second.
            self.run.refresh_from_db(fields=["reply_message"])
        with TURN_BOOKKEEPING:
            self.prepare()
            return self.model_input()

    def hand_over(self, *, reason: str, outcome: str) -> str:
        """Checkpoint what the stopped model streamed and give the run to recovery now."""
        self.write(self.checkpoint)
        self.write(recovery.recover_run, self.run.pk, reason=reason, token=self.token)
        return outcome

    # Losing the database ----------------------------------------------------------------
    def write(self, write, *args, **kwargs):
        """One of the turn's writes, tried again on a fresh connection while the database is out of
        reach for as long as the lease surely holds (runs.retry_until); then runs.DatabaseLost."""
        give_up_at = self.lease_from + runs.lease_seconds() * LEASE_SHARE_BEFORE_GIVING_UP
        return runs.retry_until(give_up_at, write, *args, **kwargs)

    def renew_lease(self) -> bool:
        """The heartbeat: extend the lease; False if it is lost."""
        renewed_at = time.monotonic()
        if not runs.heartbeat(self.run.pk, self.token):
            return False
        self.lease_from = renewed_at
        return True

    def give_up(self) -> str:
        """The database stayed away for as long as the lease surely holds; soon recovery may take
        the run over. The model stops at once (nothing may stream that the checkpoint will never
        hold) and the replay buffer goes back to the last checkpoint, which is where recovery
        continues from: a tab that (re)connects shows no text the continuation writes again.
        The run is handed to recovery if the database is back before the lease runs out; the
        sweeper does it otherwise.
        """
        log.error("run %s: the database was out of reach for as long as its lease holds; "
                  "stopping the turn for recovery", self.run.pk)
        self.stop_model()
        lease_ends = self.lease_from + runs.lease_seconds()
        if self.message is not None and time.monotonic() < lease_ends:
            try:
                replay_buffer().reset(self.message.pk, self.checkpointed)
            except Exception:
                # Without Redis too: the buffer is ahead of the checkpoint, but only by text
                # streamed before the model stopped, and recovery continues from its end.
                log.warning("run %s: the replay buffer could not be reset", self.run.pk, exc_info=True)
        try:
            runs.retry_until(lease_ends, recovery.recover_run, self.run.pk, reason="database lost",
                             token=self.token)
        except runs.DatabaseLost:
            log.warning("run %s: left to the sweeper, which recovers it once the database is back", self.run.pk)
        return "database_lost"


def checkpoint_interval() -> float:
    """Seconds between a streaming turn's checkpoints: CHECKPOINT_SECONDS, stretched so that the
    process's streaming turns write at most HUB_CHECKPOINTS_PER_SECOND in all.

    A checkpoint bounds what a recovery streams again, and costs a write: with fifty replies
    streaming in the embedded hub, their 200 checkpoints a second held SQLite's one writer for a
    fifth of each second, and the burst of sends and turn starts queued behind them
    (docs/decisions.md). With many turns each checkpoints less often; with few, as often as before.
    """
    return max(CHECKPOINT_SECONDS, len(model_loop().turns) / settings.HUB_CHECKPOINTS_PER_SECOND)


def _with_prompt(history: list, prompt: str, instructions: str | None) -> list:
    """The request list the agent's run would send: the prompt with the instructions, joined to a
    request the history ends with (a question still unanswered) rather than following it."""
    parts = [UserPromptPart(content=prompt)]
    if history and isinstance(history[-1], ModelRequest):
        history, parts = history[:-1], [*history[-1].parts, *parts]
    return [*history, ModelRequest(parts=parts, instructions=instructions or None)]


def _usage_dict(usage, model_name: str | None = None) -> dict:
    """A run's usage or a request's (pydantic-ai counts a request's as one), as the run keeps it,
    with the model name the provider reported."""
    try:
        counted = {"input_tokens": int(usage.input_tokens or 0), "output_tokens": int(usage.output_tokens or 0),
                   "requests": int(usage.requests or 0)}
    except Exception:
        return {}
    return {"model": model_name or "", **counted}


def _last_model_name(messages) -> str:
    """The model name the provider gave its latest response."""
    for message in reversed(list(messages or [])):
        if isinstance(message, ModelResponse) and message.model_name:
            return message.model_name
    return ""


def added_usage(earlier: dict, later: dict) -> dict:
    """Two usages as one: the counts summed, the later model name (the one that answered last)."""
    if not earlier:
        return dict(later or {})
    if not later:
        return dict(earlier)
    total = {key: int(earlier.get(key) or 0) + int(later.get(key) or 0)
             for key in ("input_tokens", "output_tokens", "requests")}
    return {"model": later.get("model") or earlier.get("model") or "", **total}


def _tool_entry(name, fn):
    """The pydantic-ai tool for one registry function, routed through the exactly-once wrapper."""
    import inspect

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())[1:]

    def entry(ctx: RunContext[tools.TurnDeps], **kwargs):
        return tools.run_step(ctx.deps, call_id=ctx.tool_call_id, name=name, args=kwargs, fn=fn)

    entry.__signature__ = signature.replace(
        parameters=[inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                      annotation=RunContext[tools.TurnDeps]), *params]
    )
    entry.__name__ = name
    entry.__doc__ = fn.__doc__
    entry.__annotations__ = {p.name: p.annotation for p in params} | {"ctx": RunContext[tools.TurnDeps]}
    return entry


def execute_run(run_id) -> str:
    """The body of the run_turn task. A duplicate delivery does nothing; a lost run is recovered.

    A database out of reach when the task arrives is waited for, up to a lease: the run starts
    as soon as it is back. After that the run stays queued, and the sweeper sends it again.
    """
    claim = {}
    try:
        token, run = runs.retry_until(time.monotonic() + runs.lease_seconds(), claim_and_load, run_id, claim)
    except runs.DatabaseLost:
        log.error("run %s: no database to claim it in; left to the sweeper", run_id)
        return "database_lost"
    if run is None:
        return not_claimed(run_id)
    return Turn(run, token, lease_from=claim["at"]).execute()


def claim_and_load(run_id, claim: dict):
    """(lease token, run), or (None, None) if the run was not queued. claim keeps the token and
    when the lease began, so a try after a lost database loads the run without claiming it again."""
    with TURN_BOOKKEEPING:
        if "token" not in claim:
            claim["at"] = time.monotonic()
            claim["token"] = runs.claim(run_id)
        token = claim["token"]
        return token, (load_run(run_id) if token is not None else None)


# Read at every turn's start: its SQL is built once (hub.prepared).
RUN_WITH_ITS_PARTS = PreparedRead(lambda: Run.objects.select_related("agent", "chat", "thread"), "pk")


def load_run(run_id) -> Run:
    """The run with what every turn reads. Its question comes with the thread's messages
    (inputs.thread_messages_of) and a reply it continues when first read."""
    return RUN_WITH_ITS_PARTS.get(pk=run_id)


def not_claimed(run_id) -> str:
    """A delivery that could not claim its run: gone, finished, running elsewhere, or lost."""
    run = Run.objects.filter(pk=run_id).only("status", "lease_expires_at", "lease_owner").first()
    if run is None:
        log.warning("run_turn: no run %s", run_id)
        return "missing"
    if run.status == Run.Status.RUNNING and runs.lease_is_dead(run):
        recovery.recover_run(run_id, reason="task redelivered")
        return "recovered"
    return "skipped"
