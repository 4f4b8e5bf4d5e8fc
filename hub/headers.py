"""The Content-Security-Policy header, built for each request.

The policy is what keeps agent output (untrusted text rendered as markdown) from ever running
script, should something slip past the sanitiser: only script files served by the hub itself
run, never inline script or handlers, and no plugin, frame or foreign form target is allowed.
It is per request because the websocket source depends on the host the page was reached at.
"""

from django.core.exceptions import DisallowedHost

HEADER = "Content-Security-Policy"

FIXED_DIRECTIVES = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    # No inline style either: injected CSS can still leak a page's text (attribute selectors that
    # load a background image per character). Our templates use classes from static/css; scripts
    # that size or colour an element set element.style, which the policy does not govern. (Django's
    # admin writes a <style> element on the change list of a model without actions; every model
    # of ours has one, and tests/security/test_csp.py would see a new one that does not.)
    "style-src": ["'self'"],
    # Agents and chats may have an avatar or picture at any http(s) address a user typed.
    "img-src": ["'self'", "data:", "blob:", "http:", "https:"],
    "font-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}


def websocket_source(request) -> str | None:
    """ws:// or wss:// and the host this request came to; None when the host is not allowed."""
    try:
        host = request.get_host()
    except DisallowedHost:  # the answer is already Django's 400; no socket source for it
        return None
    return f"{'wss' if request.is_secure() else 'ws'}://{host}"


def policy_for(request) -> str:
    """The policy text for one request: the fixed directives plus its websocket origin.

    `connect-src 'self'` covers same-origin websockets only in browsers that follow CSP level 3;
    the explicit ws/wss origin lets the chat page's socket through in the others as well.
    """
    directives = dict(FIXED_DIRECTIVES)
    connect = ["'self'"]
    socket = websocket_source(request)
    if socket:
        connect.append(socket)
    directives["connect-src"] = connect
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())


class ContentSecurityPolicyMiddleware:
    """Adds the policy to every response that does not carry one of its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if HEADER not in response:
            response[HEADER] = policy_for(request)
        return response
