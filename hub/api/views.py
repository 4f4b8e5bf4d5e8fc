"""The base of every API view: JSON always, so no client is refused with 406 for its Accept header
(an event-stream client still gets its stream; its errors come as JSON)."""

from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView


class ApiView(APIView):
    def perform_content_negotiation(self, request, force=False):
        renderer = JSONRenderer()
        return renderer, renderer.media_type


def valid(serializer_class, data) -> dict:
    """The request body checked by serializer_class; a bad field is a 400 that names it."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class NotFoundView(ApiView):
    """Unknown paths under /api/v1/: a JSON 404 (not the HTML page), for any method."""

    permission_classes = []
    authentication_classes = []
    schema = None

    def _not_found(self, request, *args, **kwargs):
        from hub.errors import NotFound

        raise NotFound("no such endpoint")

    get = post = put = patch = delete = _not_found
