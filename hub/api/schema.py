"""OpenAPI: every operation lists its errors in the one error shape, each with an example.

HubAutoSchema adds to each operation the errors it can answer that its own declaration does
not already list: 400 (bad input), 401 (no or bad credentials), 403 (CSRF or not allowed),
404 (no such object, also another user's), and 413/415 for operations with a body, 429 for
throttled sends.
"""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiResponse
from rest_framework import serializers


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="invalid, not_found, not_authenticated, throttled, too_large, …")
    message = serializers.CharField(help_text="A sentence a person can read; it names the field.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="For 400: each field with its problems.",
    )


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def _example(name, code, message, fields=None):
    return OpenApiExample(name, value={"error": {"code": code, "message": message, "fields": fields or {}}},
                          response_only=True)


ERRORS = {
    "400": ("Bad input: the fields and their problems.",
            _example("invalid", "invalid", "content: may not be empty", {"content": ["may not be empty"]})),
    "401": ("No credentials, or a token that is not valid or was revoked.",
            _example("not_authenticated", "not_authenticated", "Authentication credentials were not provided.")),
    "403": ("A session request without its CSRF token, or a change only staff may make.",
            _example("permission_denied", "permission_denied", "CSRF Failed: CSRF token missing.")),
    "404": ("No such object — also the answer for another user's object.",
            _example("not_found", "not_found", "no such chat")),
    "413": ("The body is larger than the limit (HUB_API_MAX_BODY_BYTES).",
            _example("too_large", "too_large", "The request body is larger than 1048576 bytes.")),
    "415": ("The body is not JSON.",
            _example("unsupported_media_type", "unsupported_media_type",
                     'Unsupported media type "text/plain" in request.')),
    "429": ("Too many sends; Retry-After says when to try again (HUB_API_SEND_RATE).",
            _example("throttled", "throttled", "Request was throttled. Expected available in 12 seconds.")),
}


def error_response(code: str) -> OpenApiResponse:
    description, example = ERRORS[code]
    return OpenApiResponse(response=ErrorSerializer, description=description, examples=[example])


class HubAutoSchema(AutoSchema):
    def _error_codes(self) -> list[str]:
        codes = ["400", "401", "403", "404"]
        if self.method in ("POST", "PUT", "PATCH"):
            codes += ["413", "415"]
        from hub.api.throttling import SendRateThrottle

        if any(isinstance(t, SendRateThrottle) for t in self.view.get_throttles()):
            codes.append("429")
        return codes

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(error_response(code), code, direction=direction)
        return responses
