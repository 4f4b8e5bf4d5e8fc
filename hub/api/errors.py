"""One error shape for the whole API: {"error": {"code", "message", "fields"}}.

HubError (what services and selectors raise) keeps its code and status; DRF's own exceptions
(authentication, permission, throttling, parsing) are mapped to the same shape; the database or
Redis not answering is 503 `unavailable` with Retry-After (hub.unavailable says when it is not).
"""

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from hub import unavailable
from hub.errors import HubError

DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
    exceptions.ParseError: "invalid",
}


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail) -> dict[str, list[str]]:
    """DRF's nested validation detail as {"field.sub": ["problem", ...]}."""
    fields: dict[str, list[str]] = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            fields.setdefault(prefix or "non_field_errors", []).extend(str(v) for v in value)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(f"{prefix}[{index}]", inner)
        else:
            fields.setdefault(prefix or "non_field_errors", []).append(str(value))

    walk("", detail)
    return fields


def exception_handler(exc, context):
    request = context.get("request")
    outage = unavailable.as_hub_error(exc, write=request is None or unavailable.is_write(request))
    if outage is not None:
        return Response(outage.as_dict(), status=outage.status, headers=unavailable.answer_headers(outage))
    if isinstance(exc, HubError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=404)
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        first_field, problems = next(iter(fields.items()))
        return Response(error_body("invalid", f"{first_field}: {problems[0]}", fields), status=400)
    if isinstance(exc, exceptions.APIException):
        code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), exc.default_code)
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None) is not None:
            headers["Retry-After"] = str(int(exc.wait) + 1)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return Response(error_body(code, str(message)), status=exc.status_code, headers=headers)
    return None  # anything else is a bug: let Django log it and answer 500
