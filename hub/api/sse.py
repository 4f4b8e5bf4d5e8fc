"""Server-Sent Events: the wire format and the streaming response.

Each event is `id: …`, `event: <type>` and one `data:` line of JSON. A comment line keeps idle
connections open through proxies.
"""

import json

from django.http import StreamingHttpResponse
from rest_framework import serializers

KEEPALIVE = b": keepalive\n\n"
RETRY_MS = 1000


def format_event(event_type: str, data: dict, *, event_id: str | None = None) -> bytes:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event_type}")
    # json.dumps never emits a raw newline, so one data line always holds the whole payload.
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def format_error(code: str, message: str) -> bytes:
    """The `error` event that ends a stream which cannot go on, in the hub's one error shape.

    It has no id, so the client's Last-Event-ID stays that of the last event it got."""
    return format_event("error", {"type": "error", "error": {"code": code, "message": message, "fields": {}}})


def sse_response(events) -> StreamingHttpResponse:
    """Stream an async iterator of bytes as text/event-stream, unbuffered."""

    async def with_retry():
        yield f"retry: {RETRY_MS}\n\n".encode()
        async for chunk in events:
            yield chunk

    response = StreamingHttpResponse(with_retry(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    return response


class EventOut(serializers.Serializer):
    """One event of a stream, as the OpenAPI schema describes it (data is a JSON object as text)."""

    event = serializers.ChoiceField(
        ["message.created", "run.updated", "message.delta", "message.settled", "run.end", "end", "error"])
    data = serializers.CharField(help_text='JSON: {"type": <the event>, …}; see docs/api.md')
    id = serializers.CharField(required=False, help_text="<run id>:<text>.<reasoning>.<state changes>.<settled>; "
                                                         "send it back as Last-Event-ID to resume")
    retry = serializers.IntegerField(required=False)
