"""What the fake model server answers (Answer, ToolCall) and what it received (ReceivedRequest)."""

import base64
import json
from dataclasses import asdict, dataclass, field, fields

ERROR_MODES = ("drop", "garbage")
PREFIX_MODES = ("honour", "ignore", "reject")


@dataclass
class ToolCall:
    name: str
    arguments: dict | str = field(default_factory=dict)
    id: str = ""  # default: call_<n> (OpenAI) or toolu_<n> (Anthropic)

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Answer:
    """What the server answers to one request."""

    text: str = "You said: {prompt}"
    reasoning: str = ""  # OpenAI: delta.reasoning_content; Anthropic: a thinking block
    tool_calls: list[ToolCall] = field(default_factory=list)
    chunk_size: int = 8  # characters per streamed delta
    chunks_per_second: float = 0.0  # 0: as fast as the socket takes them
    error: int | str | None = None  # an HTTP status (401, 429, 500, ...), "drop" or "garbage"
    drop_after: int = 2  # "drop": events sent after the first one before the connection is cut
    delay: float = 0.0  # seconds before the response starts
    retry_after: float | None = None  # sent as Retry-After with an error status
    # A request whose last message is the assistant's own partial answer: "honour" continues it
    # (vLLM with continue_final_message, Anthropic prefill), "ignore" answers afresh, "reject" refuses
    # it with a 400 (servers without the feature).
    prefix: str = "ignore"
    stall_after: int | None = None  # events sent after the first before the stream stops, held open
    # The model name the answer reports (providers name the snapshot that answered, e.g.
    # gpt-4.1-mini-2025-04-14 for gpt-4.1-mini); empty: the model the request named.
    reported_model: str = ""

    def __post_init__(self):
        if isinstance(self.error, str) and self.error.isdigit():
            self.error = int(self.error)
        if self.error not in (None, "") and not isinstance(self.error, int) and self.error not in ERROR_MODES:
            raise ValueError(f"error must be an HTTP status or one of {', '.join(ERROR_MODES)}, not {self.error!r}")
        if self.prefix not in PREFIX_MODES:
            raise ValueError(f"prefix must be one of {', '.join(PREFIX_MODES)}, not {self.prefix!r}")

    def error_status(self) -> int | None:
        return self.error if isinstance(self.error, int) else None

    @classmethod
    def from_dict(cls, data: dict) -> "Answer":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown answer fields: {', '.join(sorted(unknown))}")
        calls = [c if isinstance(c, ToolCall) else ToolCall(**c) for c in data.get("tool_calls", [])]
        return cls(**{**data, "tool_calls": calls})

    def as_dict(self) -> dict:
        return asdict(self)


def as_answer(answer: "Answer | dict | None", overrides: dict) -> Answer:
    if isinstance(answer, dict):
        answer = Answer.from_dict(answer)
    base = answer.as_dict() if answer is not None else {}
    return Answer.from_dict({**base, **overrides})


@dataclass
class ReceivedRequest:
    api: str  # "openai" or "anthropic"
    path: str
    headers: dict  # lower-cased names
    body: dict
    # When each streamed event left (time.time(), in order); for an answer of plain text, event 0
    # opens the message and events 1..n are its n pieces. A benchmark times a piece from here to
    # the client of whatever relays it.
    sent_at: list[float] = field(default_factory=list)
    # The client's end of the connection the request came on: (host, port). Requests on one
    # kept-alive connection share it.
    connection: tuple = ()
    # The model and the tokens in and out the answer reported ({} when it reported none).
    usage: dict = field(default_factory=dict)

    @property
    def api_key(self) -> str:
        bearer = self.headers.get("authorization", "")
        return bearer.removeprefix("Bearer ").strip() if bearer else self.headers.get("x-api-key", "")

    @property
    def messages(self) -> list:
        return self.body.get("messages", [])

    @property
    def model(self) -> str:
        return self.body.get("model", "")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def system(self) -> str:
        """The system prompt: Anthropic's `system` field, or OpenAI's system/developer messages."""
        if self.api == "anthropic":
            return plain_text(self.body.get("system", ""))
        instructions = [m for m in self.messages if m.get("role") in ("system", "developer")]
        return "\n".join(plain_text(m.get("content")) for m in instructions)

    @property
    def prompt(self) -> str:
        """The text of the last user message (tool results are not prompts)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                text = plain_text(message.get("content"))
                if text:
                    return text
        return ""

    @property
    def images(self) -> list[tuple[str, bytes]]:
        """(media type, bytes) of each image the user messages carry: OpenAI's image_url parts with
        a data URL, Anthropic's base64 image blocks."""
        found = []
        for message in self.messages:
            content = message.get("content") if message.get("role") == "user" else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "image_url":
                    head, _, data = str(block.get("image_url", {}).get("url", "")).partition(";base64,")
                    found.append((head.removeprefix("data:"), base64.b64decode(data)))
                elif block.get("type") == "image" and block.get("source", {}).get("type") == "base64":
                    found.append((block["source"].get("media_type", ""), base64.b64decode(block["source"]["data"])))
        return found

    @property
    def assistant_prefix(self) -> str | None:
        """The text of the last message when it is the assistant's (a partial answer to continue)."""
        last = self.messages[-1] if self.messages else {}
        if last.get("role") != "assistant" or last.get("tool_calls"):
            return None
        return plain_text(last.get("content"))

    def asks_to_continue(self) -> bool:
        """Whether the request asks for its last (assistant) message to be continued: Anthropic
        reads one as a prefill; vLLM wants continue_final_message as well."""
        if self.assistant_prefix is None:
            return False
        return self.api == "anthropic" or bool(self.body.get("continue_final_message"))

    def tool_result_ids(self) -> set[str]:
        ids = set()
        for message in self.messages:
            if message.get("role") == "tool":
                ids.add(message.get("tool_call_id", ""))
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    ids.add(block.get("tool_use_id", ""))
        return ids


def plain_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


def pending_calls(request: ReceivedRequest, answer: Answer, id_prefix: str) -> list[ToolCall]:
    """The answer's tool calls, with their ids, unless the request already carries all their results."""
    calls = [ToolCall(c.name, c.arguments, c.id or f"{id_prefix}{i}") for i, c in enumerate(answer.tool_calls)]
    answered = request.tool_result_ids()
    return [] if calls and all(c.id in answered for c in calls) else calls
