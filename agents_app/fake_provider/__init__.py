"""A fake model server that speaks the OpenAI and Anthropic HTTP APIs, for tests and benchmarks.

It is a real HTTP server on 127.0.0.1 (only), so a test drives the real provider SDKs (their
streaming parsers, retries and error mapping) instead of a stand-in. Its answers are scripted:

    fake = FakeProvider(text="Hello {prompt}")               # "{prompt}": the last user message
    base_url = fake.start()                                  # http://127.0.0.1:<port>; OpenAI: fake.openai_url
    fake.queue(Answer(error=429), Answer(text="ok"))         # the next requests, one each, in order
    fake.script(tool_calls=[ToolCall("record_effect", {"key": "k"})], text="done")  # every later request
    fake.script(text="slow", chunks_per_second=5, model="slow-model")              # one model name only
    fake.api_key = "sk-valid"                                # any other key gets the 401 answer
    fake.requests[-1].api_key, fake.requests[-1].messages    # what the model client sent
    fake.requests[-1].sent_at                                # when each streamed event left (time.time())
    fake.requests[-1].usage                                  # {model, input_tokens, output_tokens} it reported
    fake.script(text="hi", reported_model="gpt-4.1-mini-2025-04-14")  # the model name the answer reports
    fake.requests[-1].connection                             # the client's (host, port): one per connection
    fake.stop()                                              # or: with FakeProvider() as fake: ...

An answer with tool calls asks for them until the request carries their results, and then answers
with its text, so one scripted answer covers a whole tool-using turn (and its recovery). Errors:
`error=` an HTTP status (the provider's own error body; a 401 body echoes the key it refused, as
the worst providers do), "drop" (the connection is cut mid-stream) or "garbage" (a body that is
not JSON). `stall_after=n` stops a stream after n events and holds it open, as a stuck server does.

A request whose last message is the assistant's partial answer (a continuation by prefix) gets
what `prefix=` says: "honour" writes on from the end of it (Anthropic prefill; vLLM when the body
has continue_final_message), "ignore" (the default) answers afresh, "reject" refuses it with a
400. The Anthropic format refuses a partial answer that ends in whitespace, as Anthropic does.

Usage is reported as the providers do: a whole answer's `usage`, a stream's last chunk when the
request asked for it (OpenAI's stream_options.include_usage, which pydantic-ai sends), Anthropic's
message_start and message_delta; input tokens are the words of the request's messages, output
tokens the words of the answer and its thinking plus one per tool call.

Routes: POST /v1/chat/completions (OpenAI, streamed as SSE `chat.completion.chunk`s or not),
POST /v1/messages (Anthropic Messages, streamed as its named SSE events or not), GET /v1/models,
and a control API for a server in another process (`manage.py fake_model_server`):
POST /_fake/script (an answer as JSON, or {"model": ..., "answer": {...}}), POST /_fake/queue (an
answer or a list), POST /_fake/reset, GET /_fake/requests.
"""

from agents_app.fake_provider.script import Answer, ReceivedRequest, ToolCall
from agents_app.fake_provider.server import FakeProvider

__all__ = ["Answer", "FakeProvider", "ReceivedRequest", "ToolCall"]
