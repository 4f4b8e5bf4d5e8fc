"""How a continuation asks a model for the rest of an interrupted reply, and how its text is joined on.

A continuation (after a recovery, or `continue_last_turn`) has the reply's partial text. Hub's own
offline models (`builtin:`, `test:`) know it and send only the rest ("exact"). A language model is
asked in one of two ways, chosen per agent by settings["continuation"]:

* "prefix": the partial text goes last, as the start of the model's own answer, and the model
  writes on from its last character (Anthropic prefill; vLLM's `continue_final_message`, which
  llama.cpp also honours). The default for `anthropic:`. Anthropic refuses a prefill that ends in
  whitespace, so that is trimmed from what is sent (the stored text keeps it). A server that
  refuses the request (400 or 422) is asked again the instruction way.
* "instruction": the partial text is an earlier answer, followed by CONTINUE_PROMPT. The default
  for OpenAI-compatible servers and Ollama: which of them honour a prefix cannot be detected, and
  OpenAI itself refuses the extra fields.

Whatever the model sends, the start of its text goes through ContinuationText: a repeat of the
partial text (all of it, or its end from a line, sentence or word on; its last word alone only
when repeated whole) is dropped, and one space or newline is put between the two where the
continuation starts a new word.
"""

import logging
import re
import unicodedata
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import replace

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.wrapper import WrapperModel

from agents_app.models import Agent
from agents_app.scripted import CONTINUE_PROMPT

log = logging.getLogger(__name__)

CHOICES = Agent.CONTINUATIONS
PREFIX, INSTRUCTION = CHOICES
EXACT = "exact"
OFFLINE_PROVIDERS = {"builtin", "test"}
# The body fields that make vLLM (and llama.cpp) continue the last assistant message.
PREFIX_BODY = {"continue_final_message": True, "add_generation_prompt": False}
# What a server that does not take an assistant message last answers.
REFUSED_STATUSES = {400, 422}
# The ContinuationText of the turn whose model runs in this task (set by the turn): a refused prefix
# makes it join the text the instruction way.
joining: ContextVar["ContinuationText | None"] = ContextVar("hub_continuation_text", default=None)


def mode_for(agent) -> str:
    """The agent's way of continuing: "exact", "prefix" or "instruction" (see the module's docstring)."""
    provider = (agent.model or "").partition(":")[0].strip()
    if provider in OFFLINE_PROVIDERS:
        return EXACT
    chosen = (agent.settings or {}).get("continuation")
    if chosen in CHOICES:
        return chosen
    return PREFIX if provider == "anthropic" else INSTRUCTION


# --- Asking with a prefix -------------------------------------------------------------------

class PrefixContinuation(WrapperModel):
    """A model whose continuation requests send the partial answer last, for the model to extend.

    Every other request goes through unchanged. The continuation's first request ends with the
    partial answer and then CONTINUE_PROMPT (Turn.model_input); here that prompt is taken out, so
    the partial answer is the last message.
    """

    # (Names of its own: pydantic-ai's Model already has attributes such as _settings.)
    def __init__(self, wrapped, *, prefix_body: dict | None = None, trim_prefill: bool = False):
        super().__init__(wrapped)
        self.prefix_body = prefix_body or {}  # body fields that ask for the last message to be continued
        self.trim_prefill = trim_prefill  # Anthropic refuses a prefill that ends in whitespace

    def prefixed(self, messages: list) -> list | None:
        """The messages with the partial answer last, or None when this is not a continuation's request."""
        if len(messages) < 2:
            return None
        before, last = messages[-2], messages[-1]
        if not (isinstance(last, ModelRequest) and isinstance(before, ModelResponse)):
            return None
        if len(last.parts) != 1 or not _is_continue_prompt(last.parts[0]):
            return None
        if not before.parts or not all(isinstance(p, TextPart) for p in before.parts):
            return None
        parts = list(before.parts)
        if self.trim_prefill:
            parts[-1] = replace(parts[-1], content=parts[-1].content.rstrip())
        if not "".join(p.content for p in parts).strip():
            return None
        # The emptied request keeps its place (the run's instructions ride on it) and sends nothing.
        return [*messages[:-2], replace(before, parts=parts), replace(last, parts=[])]

    def _with_prefix_body(self, model_settings):
        if not self.prefix_body:
            return model_settings
        settings = dict(model_settings or {})
        settings["extra_body"] = {**self.prefix_body, **(settings.get("extra_body") or {})}
        return settings

    async def request(self, messages, model_settings, model_request_parameters):
        prefixed = self.prefixed(messages)
        if prefixed is None:
            return await self.wrapped.request(messages, model_settings, model_request_parameters)
        try:
            return await self.wrapped.request(prefixed, self._with_prefix_body(model_settings),
                                              model_request_parameters)
        except ModelHTTPError as exc:
            if exc.status_code not in REFUSED_STATUSES:
                raise
            _asked_by_instruction(self, exc)
            return await self.wrapped.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(self, messages, model_settings, model_request_parameters, run_context=None):
        prefixed = self.prefixed(messages)
        async with AsyncExitStack() as stack:
            if prefixed is None:
                stream = await stack.enter_async_context(
                    self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context))
            else:
                try:
                    stream = await stack.enter_async_context(self.wrapped.request_stream(
                        prefixed, self._with_prefix_body(model_settings), model_request_parameters, run_context))
                except ModelHTTPError as exc:
                    if exc.status_code not in REFUSED_STATUSES:
                        raise
                    _asked_by_instruction(self, exc)
                    stream = await stack.enter_async_context(
                        self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context))
            yield stream


def _is_continue_prompt(part) -> bool:
    return isinstance(part, UserPromptPart) and part.content == CONTINUE_PROMPT


def _asked_by_instruction(model, exc) -> None:
    log.info("%s refused a prefix continuation (HTTP %s); asking with the instruction instead",
             model.model_name, exc.status_code)
    text = joining.get()
    if text is not None:
        text.prefix = False


def with_continuation(model, agent, provider: str):
    """The agent's model, wrapped to continue by prefix when the agent's mode says so."""
    if mode_for(agent) != PREFIX:
        return model
    if provider == "anthropic":
        return PrefixContinuation(model, trim_prefill=True)
    return PrefixContinuation(model, prefix_body=PREFIX_BODY)


# --- Joining the continuation's text on -----------------------------------------------------

# A line that starts a block of its own in markdown: it follows the partial text on a new line.
LIST_OR_QUOTE = re.compile(r"(?:[-*+]|\d{1,3}[.)]|>|\|)\s")
HEADING_OR_FENCE = re.compile(r"(?:#{1,6}\s|```|~~~)")
# Characters a word may end with before a space, and start with after one.
ENDS_BEFORE_SPACE = set(".,;:!?)]}\"'*_`")
STARTS_AFTER_SPACE = set("([{\"'*_`")


class ContinuationText:
    """The start of a continuation's text, held until it is known whether it repeats the partial
    text, then let through without the repeat and with a seam.

    feed(text) returns what may be appended now ("" while in doubt); end() returns what is still
    held when the model's text ends (or a tool call comes). Once the start is let through,
    everything passes unchanged. In prefix mode the model writes on from the partial's last
    character, so no space is added; whitespace on both sides of the seam is never doubled.
    """

    def __init__(self, partial: str, *, prefix: bool, starts: tuple[int, ...] = ()):
        self.partial = partial
        self.prefix = prefix
        self.held = ""
        self.done = not partial.strip()
        # A repeat is partial[p:stop] for a p in self.repeats (by first character, longest first).
        self.stop = len(partial.rstrip())
        self.last_word = max(partial.rfind(ch, 0, self.stop) for ch in " \t\n\r") + 1
        self.repeats = _repeat_starts(partial, self.stop, starts)

    def feed(self, text: str) -> str:
        if self.done:
            return text
        self.held += text
        body = self.held.lstrip()
        if not body or any(self._may_still_repeat(p, body) for p in self.repeats.get(body[0], ())):
            return ""
        return self._let_through(body)

    def end(self) -> str:
        if self.done:
            return ""
        return self._let_through(self.held.lstrip(), final=True)

    def _let_through(self, body: str, final: bool = False) -> str:
        self.done = True
        starts = self.repeats.get(body[:1], ())
        repeated = next((self.stop - p for p in starts if self._repeats(p, body, final)), 0)
        if repeated:
            return _join(self.partial, body[repeated:], prefix=True)
        return _join(self.partial, self.held, prefix=self.prefix)

    def _one_word(self, p: int) -> bool:
        return p >= self.last_word

    def _may_still_repeat(self, p: int, body: str) -> bool:
        """Whether more text could still make body start with the repeat from p (or show it a whole word)."""
        length = self.stop - p
        if len(body) < length:
            return self.partial.startswith(body, p, self.stop)
        # One word needs the next character to tell "the lazy" (a repeat) from "theatre".
        return len(body) == length and self._one_word(p) and self.partial.startswith(body, p, self.stop)

    def _repeats(self, p: int, body: str, final: bool) -> bool:
        length = self.stop - p
        if len(body) < length or not self.partial.startswith(body[:length], p, self.stop):
            return False
        if not self._one_word(p):
            return True  # "quick bro" then "quick brown": the cut word is finished
        following = body[length:length + 1]
        return (not following and final) or (bool(following) and not following.isalnum())


def _repeat_starts(partial: str, stop: int, starts: tuple[int, ...]) -> dict[str, list[int]]:
    """Where the ends of the partial text a model might repeat begin, by first character: its
    start, a given start (where the text after a tool call begins), and every word (which covers
    each line and sentence)."""
    positions = {0, *starts}
    positions.update(m.start() for m in re.finditer(r"(?<=\s)\S", partial[:stop]))
    by_first: dict[str, list[int]] = {}
    for p in sorted(positions):
        if 0 <= p < stop and not partial[p].isspace():
            by_first.setdefault(partial[p], []).append(p)
    return by_first


def _join(partial: str, rest: str, *, prefix: bool) -> str:
    """rest as it must follow partial: whitespace at the seam not doubled, and (instruction mode)
    one space or newline where neither side has one and rest starts a new word or block."""
    if not partial or not rest:
        return rest
    tail = partial[len(partial.rstrip()):]
    lead = rest[:len(rest) - len(rest.lstrip())]
    body = rest[len(lead):]
    if tail and lead:
        if lead.startswith(tail):
            return lead[len(tail):] + body
        return "\n" * max(0, lead.count("\n") - tail.count("\n")) + body
    if tail or lead or prefix:
        return rest
    if HEADING_OR_FENCE.match(rest):
        return "\n\n" + rest
    if LIST_OR_QUOTE.match(rest):
        return "\n" + rest
    return " " + rest if _new_word(partial[-1], rest[0], partial) else rest


def _new_word(left: str, right: str, partial: str) -> bool:
    if _unspaced_script(left) or _unspaced_script(right):
        return False  # Chinese and Japanese put no spaces between words
    if left == "." and right.isdigit() and len(partial) > 1 and partial[-2].isdigit():
        return False  # a number: 3.5
    left_ok = left.isalnum() or left in ENDS_BEFORE_SPACE
    right_ok = right.isalnum() or right in STARTS_AFTER_SPACE
    return left_ok and right_ok


def _unspaced_script(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")
