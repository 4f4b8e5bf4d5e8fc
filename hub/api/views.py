"""The base of every API view: JSON always, so no client is refused with 406 for its Accept header
(an event-stream client still gets its stream; its errors come as JSON)."""

from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView


class ApiView(APIView):
    def perform_content_negotiation(self, request, force=False):
        renderer = JSONRenderer()
        return renderer, renderer.media_type


def page_limit(value, *, default: int, maximum: int, field: str = "limit") -> int:
    """A query's page size: absent is the default; anything but 1..maximum is a field error."""
    from hub.errors import InvalidInput

    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInput.for_field(field, f"must be a whole number from 1 to {maximum}") from None
    if not 1 <= number <= maximum:
        raise InvalidInput.for_field(field, f"must be from 1 to {maximum}")
    return number


class NotFoundView(ApiView):
    """Unknown paths under /api/v1/: a JSON 404 (not the HTML page), for any method."""

    permission_classes = []
    authentication_classes = []
    schema = None

    def _not_found(self, request, *args, **kwargs):
        from hub.errors import NotFound

        raise NotFound("no such endpoint")

    get = post = put = patch = delete = _not_found
