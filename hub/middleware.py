"""The hub's own middleware: the admin kept for staff, bad bytes refused at the door, and a clear
answer while the database or Redis is down."""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, JsonResponse
from django.urls import reverse

from hub import input as hub_input
from hub import unavailable
from hub.errors import InvalidInput


class StaffOnlyAdminMiddleware:
    """The admin is for staff only: an ordinary user gets no admin page at all.

    Django's admin would show a logged-in user without staff rights its own login form ("you are not
    authorised"), which tells them the admin exists and where. Here, a logged-in user who is not
    staff gets the site's ordinary 404 for every admin address, and a visitor who is not logged in
    is sent to the site's log-in page (staff log in there too) instead of the admin's.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self._prefix = None

    def prefix(self) -> str:
        if self._prefix is None:
            self._prefix = reverse("admin:index")
        return self._prefix

    def __call__(self, request):
        if request.path.startswith(self.prefix()):
            user = request.user
            if not user.is_authenticated:
                logout = reverse("admin:logout")
                if request.path != logout:
                    # The admin's own log-in page hands its `next` on; any other page comes back to itself.
                    if request.path == reverse("admin:login"):
                        target = request.GET.get("next", self.prefix())
                    else:
                        target = request.get_full_path()
                    return redirect_to_login(target, settings.LOGIN_URL)
            elif not (user.is_active and user.is_staff):
                raise Http404("No such page.")
        return self.get_response(request)


# A query or form key longer than this is named by where it was ("query", "form"), not by itself.
LONGEST_FIELD_NAME_SHOWN = 100


class RefuseBadInputMiddleware:
    """A request whose text holds U+0000 or a lone surrogate, or whose JSON holds NaN or an
    infinity, answers 400 naming the field, before any view can try to store it.

    Checked: the URL path, query string keys and values, form field values and uploaded file names
    (not the files' contents), and the JSON body of any page view. The answer is the API's error
    shape for /api/ and for JSON requests, a short plain text otherwise.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            check_request(request)
        except InvalidInput as exc:
            return refusal(request, exc)
        return self.get_response(request)


def check_request(request) -> None:
    hub_input.check_text("path", request.path)
    check_fields(request.GET, where="query")
    if request.path.startswith(hub_input.API_PREFIX):
        # The API's parser owns the body: it applies the API's size limits (413) before reading
        # one, and parses with the same strict rules (hub.api.parsers).
        return
    if request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded",
                                                             "multipart/form-data"):
        check_fields(request.POST, where="form")
        for name, upload in request.FILES.items():
            hub_input.check_text(shown_name(name, "form"), upload.name or "")
    elif hub_input.is_json(request.content_type):
        check_json_body(request.body)


def check_fields(data, *, where: str) -> None:
    """Each key and value of a QueryDict (query string or form)."""
    for name, values in data.lists():
        hub_input.check_text(where, name)
        for value in values:
            hub_input.check_text(shown_name(name, where), value)


def check_json_body(body: bytes) -> None:
    """A body that is not JSON at all is the view's to answer; one that is gets the strict rules."""
    try:
        value = hub_input.parse_json(body)
    except ValueError:
        return
    hub_input.check_json(value)


def shown_name(name: str, where: str) -> str:
    return name if len(name) <= LONGEST_FIELD_NAME_SHOWN else where


def refusal(request, exc: InvalidInput) -> HttpResponse:
    if hub_input.wants_json(request):
        return JsonResponse(exc.as_dict(), status=400)
    return HttpResponse(f"Bad request. {exc.message}\n", status=400, content_type="text/plain; charset=utf-8")


class ServiceUnavailableMiddleware:
    """A view that fails because the database or Redis does not answer gets a 503 that says so
    (hub.unavailable): the error shape with Retry-After for JSON, a page of its own otherwise.

    Only views' errors come here; one raised by another middleware (the session read for the
    admin) reaches handler500, which gives the same answer.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return unavailable.answer(request, exception)
