"""/api/v1/: the endpoints of both apps, the OpenAPI schema and its Swagger UI."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from hub.api.views import NotFoundView

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script as its own file (?script): the page's
    # Content-Security-Policy runs no inline script (hub.headers).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="hub/api_docs.html"),
         name="api-docs"),
    path("", include("chats.api.urls")),
    path("", include("agents_app.api.urls")),
    # Anything else under /api/v1/ answers in the API's error shape, not with the HTML 404 page.
    path("<path:rest>", NotFoundView.as_view()),
]
