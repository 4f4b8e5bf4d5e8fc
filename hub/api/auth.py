"""API tokens for programs: `Authorization: Bearer <token>` (also `Token <token>`).

Every request looks the token up, so a revoked token stops working on the next request.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from hub import services

KEYWORDS = (b"bearer", b"token")


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None  # no token: the session may still authenticate
        if len(parts) != 2:
            raise AuthenticationFailed("The Authorization header must be 'Bearer <token>'.")
        try:
            raw = parts[1].decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("The token is not valid or was revoked.") from None
        token = services.authenticate_token(raw)
        if token is None:
            raise AuthenticationFailed("The token is not valid or was revoked.")
        return token.user, token

    def authenticate_header(self, request):
        # Answering 401 (not 403) to a request without credentials needs a challenge to offer.
        return 'Bearer realm="hub"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "hub.api.auth.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A personal API token, made on /settings/tokens/ (shown once)."}
