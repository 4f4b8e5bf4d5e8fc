"""HTTP and websockets in one ASGI application (Daphne serves it)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chats.routing import websocket_urlpatterns  # noqa: E402
from hub.origins import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # A socket from any origin but the hub's own (scheme, host and port) is refused before the
        # consumer runs: the browser would send the user's cookie with it (hub.origins).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

from hub.startup import freeze_startup_heap, leave_upload_bodies_to_django  # noqa: E402

leave_upload_bodies_to_django()
freeze_startup_heap()
