"""JSON bodies with a size limit (a body over the limit answers 413 before it is read whole), parsed
strictly (hub.input: no U+0000 or lone surrogate in any key or string, no NaN or infinity)."""

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from hub import input as hub_input
from hub.api.errors import RequestTooLarge


def body_limit(view) -> int:
    """A view may allow a larger body (import) with `max_body_setting`."""
    name = getattr(view, "max_body_setting", "HUB_API_MAX_BODY_BYTES")
    return getattr(settings, name)


class LimitedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        limit = body_limit(parser_context.get("view"))
        request = parser_context.get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            # A refused text or number raises InvalidInput: a 400 naming the field.
            return hub_input.loads(body.decode(parser_context.get("encoding") or settings.DEFAULT_CHARSET))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from None
