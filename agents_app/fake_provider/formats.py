"""The two wire formats: OpenAI chat completions and Anthropic messages, streamed or whole."""

import json
import time
import uuid

from agents_app.fake_provider.script import Answer, ReceivedRequest, ToolCall, pieces, plain_text


class OpenAIFormat:
    """One answer in the OpenAI chat-completions format; the Anthropic format reuses its bookkeeping."""

    api = "openai"
    tool_id_prefix = "call_"
    garbage = b"data: {this is not json\n\n"

    def __init__(self, request: ReceivedRequest, answer: Answer, calls: list[ToolCall], text: str):
        self.request, self.answer, self.calls, self.text = request, answer, calls, text
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    def error_body(self, status: int, detail: str = "") -> dict:
        message, kind, code = {
            400: ("Invalid request: the fake server was told to refuse it.", "invalid_request_error", None),
            401: (f"Incorrect API key provided: {self.request.api_key}.", "invalid_request_error", "invalid_api_key"),
            404: (f"The model `{self.request.model}` does not exist.", "invalid_request_error", "model_not_found"),
            429: ("Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded"),
        }.get(status, ("The server had an error while processing your request.", "server_error", None))
        return {"error": {"message": detail or message, "type": kind, "param": None, "code": code}}

    def _chunk(self, delta: dict | None, finish=None, usage=None) -> dict:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        chunk = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model_name(), "system_fingerprint": None, "choices": choices}
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    def model_name(self) -> str:
        """The model the answer names: the scripted snapshot name, else the one asked for."""
        return self.answer.reported_model or self.request.model

    def usage(self) -> dict:
        output = len((self.answer.reasoning + self.text).split()) + len(self.calls)
        prompt = sum(len(plain_text(m.get("content")).split()) for m in self.request.messages)
        # Asked for only when the answer reports it: what the request's answer said it cost.
        self.request.usage = {"model": self.model_name(), "input_tokens": prompt, "output_tokens": output}
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}

    def events(self):
        """(SSE event name, data) pairs; each data after the first is one paced delta."""
        size = self.answer.chunk_size
        yield None, self._chunk({"role": "assistant", "content": ""})
        for piece in pieces(self.answer.reasoning, size):
            yield None, self._chunk({"reasoning_content": piece})
        for piece in pieces(self.text, size):
            yield None, self._chunk({"content": piece})
        for index, call in enumerate(self.calls):
            args = pieces(call.arguments_json(), size) or [""]
            head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            yield None, self._chunk({"tool_calls": [head]})
            for piece in args:
                yield None, self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield None, self._chunk({}, finish="tool_calls" if self.calls else "stop")
        if (self.request.body.get("stream_options") or {}).get("include_usage"):
            yield None, self._chunk(None, usage=self.usage())
        yield None, "[DONE]"

    def whole(self) -> dict:
        message = {"role": "assistant", "content": self.text or None, "refusal": None}
        if self.answer.reasoning:
            message["reasoning_content"] = self.answer.reasoning
        if self.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
                for c in self.calls
            ]
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model_name(),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if self.calls else "stop"}],
                "usage": self.usage()}


class AnthropicFormat(OpenAIFormat):
    """One answer in the Anthropic Messages format: content blocks (thinking, text, tool_use)."""

    api = "anthropic"
    tool_id_prefix = "toolu_"
    garbage = b"event: message_start\ndata: {this is not json\n\n"

    def __init__(self, request, answer, calls, text):
        super().__init__(request, answer, calls, text)
        self.id = f"msg_{uuid.uuid4().hex[:24]}"

    def error_body(self, status: int, detail: str = "") -> dict:
        kind, message = {
            400: ("invalid_request_error", "Invalid request: the fake server was told to refuse it."),
            401: ("authentication_error", f"invalid x-api-key: {self.request.api_key}"),
            404: ("not_found_error", f"model: {self.request.model}"),
            429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
            529: ("overloaded_error", "Overloaded"),
        }.get(status, ("api_error", "Internal server error"))
        return {"type": "error", "error": {"type": kind, "message": detail or message}}

    def usage(self) -> dict:
        counts = super().usage()
        return {"input_tokens": counts["prompt_tokens"], "output_tokens": counts["completion_tokens"]}

    def _blocks(self) -> list[tuple[dict, str, str, str]]:
        """(content block at start, delta type, delta field, full delta text) for each block."""
        blocks = []
        if self.answer.reasoning:
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""},
                           "thinking_delta", "thinking", self.answer.reasoning))
        if self.text:
            blocks.append(({"type": "text", "text": ""}, "text_delta", "text", self.text))
        for call in self.calls:
            blocks.append(({"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
                           "input_json_delta", "partial_json", call.arguments_json()))
        return blocks

    def _stop_reason(self) -> str:
        return "tool_use" if self.calls else "end_turn"

    def events(self):
        usage = self.usage()
        start = {"id": self.id, "type": "message", "role": "assistant", "model": self.model_name(), "content": [],
                 "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
        yield "message_start", {"type": "message_start", "message": start}
        for index, (block, delta_type, key, text) in enumerate(self._blocks()):
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
            for piece in pieces(text, self.answer.chunk_size):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": delta_type, key: piece}}
            if block["type"] == "thinking":
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "signature_delta", "signature": "fake-signature"}}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": self._stop_reason(), "stop_sequence": None},
                                "usage": {"output_tokens": usage["output_tokens"]}}
        yield "message_stop", {"type": "message_stop"}

    def whole(self) -> dict:
        content = []
        for block, _, key, text in self._blocks():
            if block["type"] == "tool_use":
                content.append({**block, "input": json.loads(text or "{}")})
            elif block["type"] == "thinking":
                content.append({**block, key: text, "signature": "fake-signature"})
            else:
                content.append({**block, key: text})
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model_name(),
                "content": content, "stop_reason": self._stop_reason(), "stop_sequence": None, "usage": self.usage()}


FORMATS = {"/v1/chat/completions": OpenAIFormat, "/v1/messages": AnthropicFormat}
