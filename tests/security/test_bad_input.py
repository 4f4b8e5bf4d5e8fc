"""Bad bytes get a 400, never a 500: hostile values in every API operation, page form, page JSON
endpoint and websocket frame type.

Hostile values (tests/security/hostile.py): texts with U+0000 or a lone surrogate, NaN and the
infinities, over-long texts, huge integers, values of the wrong type, each put into one field of an
otherwise sensible request. Every answer is below 500 (the socket answers and stays open); a value
that must be refused is refused wherever it is; and a refusal leaves everything the user stores
as it was. The API operations come from the OpenAPI schema and the pages from the URL patterns, so
a new operation is covered by itself and a new POST route fails the test until it is covered here.
"""

import asyncio
import json
import math
import zlib
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.forms import AuthenticationForm
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from agents_app.forms import AgentForm, ProviderKeyForm, RemoteForm
from chats.consumers import ChatConsumer
from chats.forms import ChatForm, MemoryBlockForm, SignupForm
from hub.views import InvitationForm, TokenForm
from tests.security.bad_input_world import (  # noqa: F401 (fixtures)
    fresh_channel_layer,
    socket_frame_thread_disconnected,
    stored_rows,
    world_fixture,
)
from tests.security.hostile import LENGTHS, Hostile, hostile_json, hostile_text, refused_key

RANDOM_EXAMPLES_PER_SLOT = 3


def for_examples(label: str, cases, check, *, always=(), max_examples: int = RANDOM_EXAMPLES_PER_SLOT) -> None:
    """Run check on the examples always, then on examples drawn from cases: the same ones on every
    run (seeded by the label)."""

    @seed(zlib.crc32(label.encode()))
    @settings(max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=cases)
    def run(case):
        check(case)

    for case in always:
        run = example(case=case)(run)
    run()


# Tried in every slot, besides the drawn ones: the plainest of each kind.
ALWAYS_TEXT = (Hostile("a\x00b", True), Hostile("x" * 100_001, False), Hostile(str(10**30), False))
ALWAYS_JSON = (*ALWAYS_TEXT, Hostile("\ud800", True), Hostile(math.nan, True), Hostile(2**64, False),
               Hostile({"x": "y"}, False))


class StoredRows:
    """What the user stores, to tell whether an answer changed it: read once per request."""

    def __init__(self, user):
        self.user = user
        self.rows = stored_rows(user)

    def check_answer(self, status: int, hostile, label: str) -> None:
        """No server error; a value to refuse is refused; a refusal changes nothing stored."""
        before, self.rows = self.rows, stored_rows(self.user)
        assert status < 500, f"{label}: {status} for {hostile!r}"
        if hostile.refused:
            assert 400 <= status < 500, f"{label}: {status}, not a refusal, for {hostile!r}"
        if status >= 400:
            assert self.rows == before, f"{label}: refused with {status} but stored rows changed, for {hostile!r}"


# --- The API, from its OpenAPI schema ---------------------------------------------------------

@dataclass
class ApiOperation:
    method: str
    path: str
    path_params: list[str]
    query_params: list[str]
    body: dict | None  # the request body's JSON schema, references resolved
    label: str = ""

    def __post_init__(self):
        self.label = f"{self.method} {self.path}"


def _resolve(schema: dict, components: dict) -> dict:
    if "$ref" in schema:
        return components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def api_operations() -> list[ApiOperation]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    operations = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            parameters = operation.get("parameters", [])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            operations.append(ApiOperation(
                method=method.upper(), path=path,
                path_params=[p["name"] for p in parameters if p["in"] == "path"],
                query_params=[p["name"] for p in parameters if p["in"] == "query"],
                body=_resolve(body["schema"], components) if body else None,
            ))
    return operations


# Sensible values of the fields a request needs, by name; ids come from the world.
API_VALUES = {"name": "Probe", "model": "test:scripted", "content": "hello", "text": "more", "label": "probe2",
              "key": "sk-probe-key-5678", "url": "http://127.0.0.1:9/mcp"}
WORLD_ID_FIELDS = ("chat_id", "message_id", "agent_id")


def valid_body(operation: ApiOperation, world: dict) -> dict:
    """A body the operation would take: its required fields, or (import) a real export."""
    if operation.path == "/api/v1/chats/import/":
        from chats.services import export_chat

        return export_chat(world["chat"])
    return {name: world["ids"][name] if name in WORLD_ID_FIELDS else API_VALUES.get(name, "probe")
            for name in operation.body.get("required", [])}


def body_paths(sample: dict) -> list[tuple]:
    """Every field of a body, nested ones too (a list's first item stands for the others)."""
    paths = []
    for key, value in sample.items():
        paths.append((key,))
        if isinstance(value, dict):
            paths += [(key, *inner) for inner in body_paths(value)]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            paths += [(key, 0, *inner) for inner in body_paths(value[0])]
    return paths


def api_slots(operation: ApiOperation, world: dict) -> list[tuple[str, tuple]]:
    """Where a hostile value can go: a path parameter, a query parameter (an unknown one too),
    a body field (each of the schema's, and each of the sample body's), a key of its own, or the
    body as a whole."""
    slots = [("path", (name,)) for name in operation.path_params]
    slots += [("query", (name,)) for name in [*operation.query_params, "probe"]]
    if operation.body is not None:
        fields = [(name,) for name in operation.body.get("properties", {})]
        fields += [path for path in body_paths(valid_body(operation, world)) if path not in fields]
        slots += [("body", path) for path in fields] + [("body-key", ()), ("whole-body", ())]
    return slots


def field_lengths(schema: dict | None) -> tuple[int, ...]:
    """Around a text field's limit (at it, one past it), and the usual lengths."""
    limit = (schema or {}).get("maxLength")
    return (*LENGTHS, limit, limit + 1) if limit else LENGTHS


def api_values(operation: ApiOperation, where: str, path: tuple):
    properties = (operation.body or {}).get("properties", {})
    if where in ("path", "query"):
        return hostile_text()
    if where == "body":
        return hostile_json(field_lengths(_property(properties.get(path[0]) if len(path) == 1 else None)))
    if where == "body-key":
        return refused_key()
    return hostile_json()


def _property(schema: dict | None) -> dict | None:
    return (schema or {}).get("allOf", [schema])[0] if schema else None


def put_at(body: dict, path: tuple, value) -> None:
    for step in path[:-1]:
        body = body[step]
    body[path[-1]] = value


def send_api(client: Client, operation: ApiOperation, world: dict, where: str, path: tuple, hostile):
    params = {p: str(world["ids"].get(p, "probe")) for p in operation.path_params}
    query = {}
    body = valid_body(operation, world) if operation.body is not None else None
    if where == "path":
        params[path[0]] = hostile.value
    elif where == "query":
        query[path[0]] = hostile.value
    elif where == "body":
        put_at(body, path, hostile.value)
    elif where == "body-key":
        body[hostile.value] = "value"
    elif where == "whole-body":
        body = hostile.value
    url = with_query(operation.path.format(**{p: quote(str(v), safe="") for p, v in params.items()}), query)
    kwargs = {} if body is None else {"data": json.dumps(body), "content_type": "application/json"}
    return client.generic(operation.method, url, **kwargs)


@pytest.mark.django_db
@pytest.mark.parametrize("operation", api_operations(), ids=lambda operation: operation.label)
def test_every_api_operation_refuses_bad_input_without_a_server_error(operation, world):
    client = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {world['token']}"})
    stored = StoredRows(world["user"])
    for where, path in api_slots(operation, world):
        label = f"{operation.label} [{where} {'.'.join(map(str, path))}]"

        def check(hostile, where=where, path=path, label=label):
            response = send_api(client, operation, world, where, path, hostile)
            stored.check_answer(response.status_code, hostile, label)  # a stream is not read: its status is the answer
            if response.status_code >= 400 and not response.streaming:
                assert response.json()["error"]["code"], f"{label}: {response.status_code} without the error shape"

        always = () if where == "body-key" else ALWAYS_TEXT if where in ("path", "query") else ALWAYS_JSON
        for_examples(label, api_values(operation, where, path), check, always=always)


def with_query(path: str, query: dict) -> str:
    if not query:
        return path
    return path + "?" + "&".join(f"{quote(k)}={quote(str(v), safe='')}" for k, v in query.items())


# --- Pages: every POST route, and the chat page's JSON reads -----------------------------------

@dataclass
class PageRoute:
    name: str
    method: str = "POST"
    form: list[str] = field(default_factory=list)  # form fields posted (multipart or urlencoded)
    json: list[str] = field(default_factory=list)  # keys of a JSON body
    query: list[str] = field(default_factory=list)
    anonymous: bool = False
    lengths: dict[str, int] = field(default_factory=dict)  # a form field's own limit


def form_route(name: str, form_class, **options) -> PageRoute:
    fields = form_class.base_fields
    limits = {n: f.max_length for n, f in fields.items() if getattr(f, "max_length", None)}
    return PageRoute(name, form=list(fields), lengths=limits, **options)


PAGE_ROUTES = [
    form_route("signup", SignupForm, anonymous=True),
    form_route("login", AuthenticationForm, anonymous=True),
    PageRoute("logout"),
    form_route("chats:create", ChatForm),
    PageRoute("chats:create", json=["title", "description", "picture", "agents", "temporary"]),
    form_route("chats:memory", MemoryBlockForm),
    PageRoute("chats:memory_entry_delete"),
    PageRoute("chats:regenerate"),
    PageRoute("chats:update", json=["title", "description", "picture"]),
    PageRoute("chats:delete"),
    PageRoute("chats:restore"),
    PageRoute("chats:save"),
    PageRoute("chats:remote_attach", json=["remote_id", "thread_id", "new_thread_title"]),
    PageRoute("chats:member_add", json=["agent_id"]),
    PageRoute("chats:member_remove"),
    PageRoute("chats:message_feedback", json=["rating"]),
    PageRoute("chats:message_resubmit", json=["content"]),
    PageRoute("chats:message_branch"),
    PageRoute("chats:organize", json=["pinned", "archived", "folder_id", "tags"]),
    PageRoute("chats:tag_add", json=["name"]),
    PageRoute("chats:tag_remove", json=["name"]),
    PageRoute("chats:folders", json=["name", "instructions"]),
    PageRoute("chats:folder_update", json=["name", "instructions"]),
    PageRoute("chats:folder_delete"),
    PageRoute("agents:model", json=["model"]),
    PageRoute("chats:file_upload", form=["file"]),
    PageRoute("chats:file_remove"),
    PageRoute("chats:chat_shares", json=["include_notes", "include_memory"]),
    PageRoute("chats:share_revoke"),
    PageRoute("chats:share_revoke", json=["probe"]),
    form_route("agents:create", AgentForm),
    form_route("agents:edit", AgentForm),
    PageRoute("agents:delete"),
    form_route("agents:keys", ProviderKeyForm),
    PageRoute("agents:key_delete"),
    form_route("agents:remotes", RemoteForm),
    PageRoute("agents:remote_delete"),
    PageRoute("agents:remote_attach", form=["chat_id", "thread_id"]),
    form_route("api_tokens", TokenForm),
    PageRoute("api_token_revoke"),
    form_route("invitations", InvitationForm),
    PageRoute("invitation_revoke"),
    # These take no body: a POST is answered as a GET would be.
    PageRoute("agents:list"),
    PageRoute("agents:remote_choices"),
    # The chat page's JSON reads.
    PageRoute("chats:directory", method="GET", query=["q", "trash", "before", "limit", "archived", "folder", "tag"]),
    PageRoute("chats:folders", method="GET"),
    PageRoute("chats:state", method="GET"),
    PageRoute("chats:file_download", method="GET", query=["download"]),
    PageRoute("chats:threads", method="GET"),
    PageRoute("chats:messages", method="GET", query=["before", "after", "ids", "thread", "edited_after"]),
    PageRoute("chats:message_search", method="GET", query=["q"]),
    PageRoute("chats:chat_shares", method="GET", query=["before"]),
    PageRoute("chats:shared_links", method="GET", query=["before"]),
    PageRoute("chats:shared_chat", method="GET", anonymous=True),
    PageRoute("agents:model_choices", method="GET", query=["provider", "base_url", "agent", "refresh"]),
]

FORM_VALUES = {"model": "test:scripted", "url": "http://127.0.0.1:9/mcp", "base_url": "", "key": "sk-probe-key-9999",
               "username": "newcomer", "password": "a-long-pass-phrase-42", "password1": "a-long-pass-phrase-42",
               "password2": "a-long-pass-phrase-42", "name": "Probe", "label": "probe", "provider": "openai",
               "reply_policy": "always", "recovery_policy": "continue", "max_tokens": "100", "temperature": "0.5",
               "header_name": "", "header_value": "", "tools": "", "agents": ""}


def pattern_params() -> dict[str, list[str]]:
    """Every named route outside the API and the admin, with its path parameters' names.

    The API is covered from its schema; the admin's forms are Django's own, for staff, and behind
    the same middleware."""
    found = {}

    def walk(patterns, namespace, prefix):
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                if route.startswith(("admin/", "api/")):
                    continue
                walk(entry.url_patterns, entry.namespace or namespace, route)
            elif isinstance(entry, URLPattern):
                qualified = f"{namespace}:{entry.name}" if namespace else entry.name
                found[qualified or route] = list(entry.pattern.converters)

    walk(get_resolver().url_patterns, None, "")
    return found


def page_slots(route: PageRoute, params: list[str]) -> list[tuple[str, str]]:
    slots = [("path", p) for p in params] + [("query", q) for q in [*route.query, "probe"]]
    slots += [("form", f) for f in route.form] + [("json", k) for k in route.json]
    if route.json:
        slots += [("json-key", ""), ("whole-json", "")]
    return slots


def page_values(route: PageRoute, where: str, name: str):
    """Hostile values for the slot, and (for a form) how it is encoded."""
    limit = route.lengths.get(name)
    lengths = (*LENGTHS, limit, limit + 1) if limit else LENGTHS
    if where in ("path", "query", "form"):
        values = hostile_text(lengths)
    elif where == "json-key":
        values = refused_key()
    else:
        values = hostile_json(lengths)
    return st.tuples(values, st.sampled_from(["multipart", "urlencoded"]))


PATH_PLACEHOLDER = "987654321"


def page_ids(world) -> dict:
    """The world's ids, and an invitation of the user's (the user may invite: HUB_ALLOW_INVITES)."""
    from hub.services import create_invitation

    invitation, _ = create_invitation(user=world["user"], note="probe")
    return {**world["ids"], "invitation_id": invitation.pk}


def send_page(client: Client, route: PageRoute, params: list[str], ids: dict, where: str, name: str, hostile,
              encoding: str):
    kwargs = {p: str(ids[p]) for p in params}
    if where == "path":
        kwargs[name] = PATH_PLACEHOLDER  # replaced below: reverse() refuses what its converter would not match
    path = reverse(route.name, kwargs=kwargs)
    if where == "path":
        path = path.replace(PATH_PLACEHOLDER, quote(str(hostile.value), safe=""))
    path = with_query(path, {name: hostile.value} if where == "query" else {})
    if route.method == "GET":
        return client.get(path, headers={"Accept": "application/json"})
    if route.json:
        return client.post(path, json.dumps(page_json(route, ids, where, name, hostile)),
                           content_type="application/json", headers={"Accept": "application/json"})
    form = {key: FORM_VALUES.get(key, "probe") for key in route.form}
    form.update({key: str(ids[key]) for key in ("chat_id",) if key in route.form})
    if where == "form":
        form[name] = hostile.value
    form = {key: value for key, value in form.items() if value != ""}
    if encoding == "urlencoded":
        return client.post(path, urlencode(form), content_type="application/x-www-form-urlencoded")
    return client.post(path, form)


def page_json(route: PageRoute, ids: dict, where: str, name: str, hostile):
    body = {key: ids.get(key, "probe") for key in route.json if key not in ("agents", "thread_id")}
    if where == "json":
        body[name] = hostile.value
    elif where == "json-key":
        body[hostile.value] = "value"
    elif where == "whole-json":
        body = hostile.value
    return body


@pytest.mark.django_db
@pytest.mark.parametrize("route", PAGE_ROUTES, ids=lambda r: f"{r.method} {r.name}{' json' if r.json else ''}")
def test_every_page_form_and_json_endpoint_refuses_bad_input_without_a_server_error(route, world, settings):
    settings.HUB_ALLOW_SIGNUP = settings.HUB_ALLOW_INVITES = True
    user, ids, stored = world["user"], page_ids(world), StoredRows(world["user"])
    params = pattern_params()[route.name]
    logged_in = Client(raise_request_exception=False)
    logged_in.force_login(user)
    for where, name in page_slots(route, params):
        label = f"{route.method} {route.name}{' json' if route.json else ''} [{where} {name}]"

        def check(case, where=where, name=name, label=label):
            hostile, encoding = case
            client = logged_in
            if route.anonymous or route.name == "logout":  # a fresh session: logging out ends it
                client = Client(raise_request_exception=False)
                if not route.anonymous:
                    client.force_login(user)
            response = send_page(client, route, params, ids, where, name, hostile, encoding)
            stored.check_answer(response.status_code, hostile, label)

        always = () if where == "json-key" else ALWAYS_JSON if where.startswith(("json", "whole")) else ALWAYS_TEXT
        for_examples(label, page_values(route, where, name), check,
                     always=[(hostile, "multipart") for hostile in always])


@pytest.mark.django_db
def test_every_post_route_is_covered_and_every_api_route_is_in_the_schema(make_user):
    """A route that takes a POST and is not in PAGE_ROUTES fails here: cover it above."""
    prober = make_user("route-prober")
    taking_post = set()
    for name, params in pattern_params().items():
        client = Client(raise_request_exception=False)
        client.force_login(prober)
        path = reverse(name, kwargs={p: 1 for p in params})
        if client.post(path).status_code != 405:
            taking_post.add(name)
    covered = {route.name for route in PAGE_ROUTES if route.method == "POST"}
    assert taking_post == covered, f"not covered: {taking_post - covered}; no longer there: {covered - taking_post}"

    schema_paths = set(SchemaGenerator().get_schema(request=None, public=True)["paths"])
    api_routes = set()

    def walk(patterns, prefix):
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif route.startswith("api/v1/") and entry.name not in ("api-schema", "api-docs"):
                api_routes.add("/" + route)

    walk(get_resolver().url_patterns, "")
    api_routes.discard("/api/v1/<path:rest>")  # the API's own 404 for anything else
    as_schema = {_openapi_path(route) for route in api_routes}
    assert as_schema <= schema_paths, f"API routes missing from the schema: {as_schema - schema_paths}"


def _openapi_path(route: str) -> str:
    import re

    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


# --- Websockets: every frame type of ChatConsumer.inbound, and the directory socket -----------

CHAT_FRAMES = {
    "message.send": {"content": "hello", "client_id": "c1", "thread_id": None, "new_thread_title": None,
                     "kind": "message"},
    "message.edit": {"message_id": "MESSAGE", "content": "edited", "client_id": "c2"},
    "run.cancel": {"run_id": "RUN", "client_id": "c3"},
}
# The directory socket takes no frames: it answers each, whatever it is, with an error.
DIRECTORY_FRAMES = {"message.send": CHAT_FRAMES["message.send"], "directory.refresh": {}}


def test_every_inbound_frame_type_is_covered():
    assert set(ChatConsumer.inbound) == set(CHAT_FRAMES)


def frame_slots(frames: dict) -> list[tuple[str, str, str]]:
    """(frame type, where, field): each field, the type itself, a key of its own, the frame as a
    whole, and a binary frame."""
    slots = []
    for frame_type, fields in frames.items():
        slots += [(frame_type, "field", name) for name in [*fields, "type"]]
        slots += [(frame_type, where, "") for where in ("key", "whole", "binary")]
    return slots


def frame_values(where: str):
    if where == "key":
        return refused_key()
    if where == "binary":
        return st.binary(min_size=1, max_size=20).map(lambda data: Hostile(data, True))
    return hostile_json()


def frame_for(frames: dict, ids: dict, frame_type: str, where: str, name: str, hostile) -> bytes | str:
    if where == "binary":
        return hostile.value
    placeholders = {"MESSAGE": ids["message_id"], "RUN": ids["run_id"]}
    frame = {"type": frame_type}
    fields = frames[frame_type].items()
    frame.update({key: placeholders.get(value, value) for key, value in fields if value is not None})
    if where == "field":
        frame[name] = hostile.value
    elif where == "key":
        frame[hostile.value] = "value"
    elif where == "whole":
        frame = hostile.value
    return json.dumps(frame)


async def answers_then_probe(socket: WebsocketCommunicator, frame) -> list[dict]:
    """Send the frame, then a probe; everything the socket said up to the probe's answer."""
    if isinstance(frame, bytes):
        await socket.send_to(bytes_data=frame)
    else:
        await socket.send_to(text_data=frame)
    await socket.send_json_to({"type": "probe.still-open", "client_id": "probe"})
    said = []
    while True:
        output = await socket.receive_output(timeout=10)
        assert output["type"] == "websocket.send", f"the socket closed: {output}"
        event = json.loads(output["text"])
        if event.get("type") == "error" and event.get("client_id") == "probe":
            return said
        said.append(event)


async def exchange(path: str, user, frame) -> tuple[list[dict], dict, dict]:
    from chats.routing import websocket_urlpatterns

    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    socket.scope["user"] = user
    connected, _ = await socket.connect(timeout=5)
    assert connected
    try:
        before = await database_sync_to_async(stored_rows)(user)
        said = await answers_then_probe(socket, frame)
        after = await database_sync_to_async(stored_rows)(user)
    finally:
        await socket.disconnect()
    return said, before, after


def check_socket_slots(path: str, world, frames: dict) -> None:
    user, ids = world["user"], world["ids"]
    with asyncio.Runner() as loop:  # one event loop for every socket of the test, as in a server process
        for frame_type, where, name in frame_slots(frames):
            check_frames_in(loop, path, user, ids, frames, frame_type, where, name)


def check_frames_in(loop, path: str, user, ids: dict, frames: dict, frame_type: str, where: str, name: str) -> None:
    """Hostile values in one place of one frame type: an answer, an open socket, nothing stored changed."""
    label = f"{path} {frame_type} [{where} {name}]"

    def check(hostile):
        frame = frame_for(frames, ids, frame_type, where, name, hostile)
        said, before, after = loop.run(exchange(path, user, frame))
        errors = [event for event in said if event["type"] == "error"]
        if hostile.refused:
            assert errors and errors[0]["error"]["code"] == "invalid", f"{label}: no error frame, said {said}"
        if errors:
            assert after == before, f"{label}: refused but stored rows changed"

    always = {"field": ALWAYS_JSON, "whole": ALWAYS_JSON, "binary": [Hostile(b"\x00\xff", True)]}.get(where, ())
    for_examples(label, frame_values(where), check, always=always)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer")
def test_every_chat_socket_frame_type_answers_bad_input_and_stays_open(world):
    check_socket_slots(f"/ws/chats/{world['chat'].pk}/", world, CHAT_FRAMES)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_channel_layer")
def test_the_directory_socket_answers_bad_input_and_stays_open(world):
    check_socket_slots("/ws/directory/", world, DIRECTORY_FRAMES)
