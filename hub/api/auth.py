"""API tokens for programs: `Authorization: Bearer <token>` (also `Token <token>`).

Every request looks the token up, so a revoked token stops working on the next request. Failed
attempts are counted per client address (hub.throttle): past HUB_TOKEN_FAILURE_LIMIT a window,
the address is answered 429 with Retry-After, before any token it sends is looked at.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from hub import services, throttle

KEYWORDS = (b"bearer", b"token")


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None  # no token: the session may still authenticate
        address = throttle.client_address(request)
        wait = throttle.TOKEN_BY_ADDRESS.seconds_locked(address)
        if wait:
            raise Throttled(wait=wait, detail="Too many failed token attempts from your address.")
        token = self._token(parts)
        if token is None:
            # A success does not clear the count: a program with one good token could otherwise
            # wipe it between guesses.
            throttle.TOKEN_BY_ADDRESS.record(address)
            raise AuthenticationFailed(
                "The token is not valid or was revoked." if len(parts) == 2
                else "The Authorization header must be 'Bearer <token>'.")
        return token.user, token

    @staticmethod
    def _token(parts):
        if len(parts) != 2:
            return None
        try:
            raw = parts[1].decode()
        except UnicodeDecodeError:
            return None
        return services.authenticate_token(raw)

    def authenticate_header(self, request):
        # Answering 401 (not 403) to a request without credentials needs a challenge to offer.
        return 'Bearer realm="hub"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "hub.api.auth.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A personal API token, made on /settings/tokens/ (shown once)."}
