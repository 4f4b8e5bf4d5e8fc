"""Every route, swept with another user's ids: 404 (or 405), nothing of theirs in any answer, and
nothing of theirs changed.

The routes come from Django's URL resolver and the websocket router, so a route added anywhere is
swept as soon as it exists: a path parameter that PATH_VALUES does not map fails the sweep until it
is mapped to the victim's object, and a route left out needs an entry in EXCLUDED with its reason.
Ids that travel in a body or a query string are listed in body_and_query_cases. The API's lists and
searches have their own tests (tests/api/test_isolation.py); this is the generic net under every
route, pages and the page's JSON endpoints included.

Every text the victim owns carries a marker (MARKERS); an answer to the attacker that holds one, in
its body or a header, is a leak.
"""

import json
import re
from dataclasses import dataclass, field
from itertools import product
from urllib.parse import urlencode

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client, override_settings
from django.urls import URLResolver, get_resolver
from django.urls.resolvers import RegexPattern

MARK = "qvictim"  # every marker starts so: a search for it finds all of them, if scoping fails
MARKERS = {name: MARK + name for name in (
    "chattitle", "chatdescription", "threadtitle", "question", "followup", "reply", "reasoning", "trashedtitle",
    "agentname", "agentdescription", "systemprompt", "memorydescription", "memoryentry", "documentlabel",
    "documentkey", "documentcontent", "remotename", "remotehost", "remoteheader", "providerkey", "tokenname",
    "invitationnote", "temporarytitle", "temporarymessage", "filename", "filecontent", "unsentname",
    "foldername", "folderinstructions", "tagname",
    # Written by the victim while the attacker's sockets are open (the socket test).
    "latermemory", "laterdescription",
)}
# Not a marker: a memory label names a slot in each user's own namespace, and the attacker types it
# into the URL, so an answer about their own slot may echo it.
MEMORY_LABEL = "vault"
PASSWORD = "pass-for-tests-1"
NO_UUID = "5b0e0f4e-0000-4000-8000-00000000dead"
NO_INT = 2_000_000_000

# Each path parameter of any route: the victim's objects it names (each one is tried), and a value
# naming nothing, whose answer must be the same (no existence leak). None: not an id (see OWN_SLOT).
PATH_VALUES = {
    # A live chat, one in the trash (what restore looks up) and a temporary one (in Redis).
    "chat_id": (lambda w: [w.chat.pk, w.trashed_chat.pk, w.temporary_chat.pk], NO_UUID),
    "thread_id": (lambda w: [w.thread.pk], NO_INT),
    # The victim's question and their agent's reply.
    "message_id": (lambda w: [w.question.pk, w.reply.pk], NO_INT),
    "agent_id": (lambda w: [w.agent.pk], NO_INT),
    # A finished run (regenerate, events) and a queued one (cancel, continue).
    "run_id": (lambda w: [w.finished_run.pk, w.queued_run.pk, w.temporary_run], NO_UUID),
    "remote_id": (lambda w: [w.remote.pk], NO_INT),
    "token_id": (lambda w: [w.token.pk], NO_INT),
    "entry_id": (lambda w: [w.entry.pk], NO_INT),
    "document_id": (lambda w: [w.document.pk], NO_INT),
    "label": (lambda w: [MEMORY_LABEL], None),
    "provider": (lambda w: [w.key.provider], None),
    "invitation_id": (lambda w: [w.invitation.pk], NO_INT),
    # A file sent with the victim's question, and one uploaded and not sent yet.
    "file_id": (lambda w: [w.sent_file.pk, w.unsent_file.pk], NO_UUID),
    # A finished export (with a file to download) and an import still queued.
    "transfer_id": (lambda w: [w.export.pk, w.import_job.pk], NO_UUID),
    # A live share link of the victim's chat (revoking it is theirs alone).
    "share_id": (lambda w: [w.share.pk], NO_INT),
    # A folder of the victim's, with instructions and a chat in it.
    "folder_id": (lambda w: [w.folder.pk], NO_INT),
}

# Routes that are not per-object, each with its reason. An entry ending in "*" is a prefix.
EXCLUDED = {
    "admin/*": "the admin and the staff pages: staff only, an ordinary user gets 404 (tests/admin/test_access.py)",
    "api/v1/<path:rest>": "the API's catch-all: a JSON 404 for any path, it looks nothing up",
    "api/v1/schema/": "the OpenAPI description of the API: no user data",
    "api/v1/docs/": "Swagger UI over the schema: no user data",
    "s/<str:token>/": "a share link's page is public by design: whoever holds the token reads the snapshot its owner "
                      "chose to share; what it shows and hides is tests/security/test_share_links.py",
}

# Routes whose parameter names a slot of the caller's own (a memory label, a provider), not a row:
# with the victim's value the attacker reads (404: none) or writes their own block or key. They may
# answer these statuses; nothing of the victim's may show or change all the same.
OWN_SLOT = {
    "api/v1/memory/<str:label>/": {200, 404, 405},  # PUT makes the attacker's own block
    "api/v1/memory/<str:label>/append/": {200, 405, 415},  # JSON only: a form body is 415
    "api/v1/provider-keys/<str:provider>/": {200, 204, 404, 405},  # PUT stores, DELETE drops the attacker's key
    "agents/keys/<str:provider>/delete/": {302, 405},  # drops the attacker's key (none), back to the keys page
}
# Every other route answers 404, or 405 for a method it does not take. The attacker is logged in,
# so no route is log-in gated (401) for them, and no route is staff-gated (403) before its lookup
# today; one that is gets an entry like these, with its status and the reason.

# What the sweep sends to each route: a plausible JSON body (every field a route here reads, with the
# victim's ids where a field names one) and the same as a form.
REQUESTS = (("GET", None), ("POST", "json"), ("POST", "form"), ("PUT", "json"), ("PATCH", "json"), ("DELETE", None))


@dataclass
class World:
    """The victim's objects (one of everything), the attacker's own few, and HTTP clients."""

    victim: object
    attacker: object
    chat: object
    trashed_chat: object
    temporary_chat: object
    temporary_run: str
    thread: object
    question: object
    reply: object
    finished_run: object
    queued_run: object
    agent: object
    entry: object
    document: object
    remote: object
    key: object
    token: object
    invitation: object
    own_chat: object
    own_remote: object
    sent_file: object = None
    unsent_file: object = None
    export: object = None
    import_job: object = None
    share: object = None
    folder: object = None
    clients: dict = field(default_factory=dict)


def build_world() -> World:
    """Two users made through the real services; the victim's texts all carry a marker."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from agents_app import remotes, secrets
    from agents_app.models import Run
    from agents_app.services import create_agent
    from agents_app.turns.execution import execute_run
    from chats import memory, search
    from chats.services import create_chat, delete_chat, send_message, upload_file
    from chats.temporary.scope import inside
    from hub.services import create_api_token, create_invitation

    m = MARKERS
    users = get_user_model().objects
    victim = users.create_user("victim", password=PASSWORD)
    attacker = users.create_user("attacker", password=PASSWORD)
    script = {"reply": m["reply"], "reasoning": m["reasoning"], "chunk": 64, "delay": 0}
    agent = create_agent(owner=victim, name=m["agentname"], model="test:scripted", description=m["agentdescription"],
                         system_prompt=m["systemprompt"], settings={"script": script})
    chat = create_chat(owner=victim, title=m["chattitle"], description=m["chatdescription"], agents=[agent])
    question = send_message(chat=chat, content=m["question"], new_thread_title=m["threadtitle"])
    finished_run = Run.objects.get(trigger_message=question)
    execute_run(finished_run.pk)
    finished_run.refresh_from_db()
    # Its run is left queued: a live turn someone could try to cancel, continue or watch.
    follow_up = send_message(chat=chat, thread=question.thread, content=m["followup"])
    trashed_chat = create_chat(owner=victim, title=m["trashedtitle"])
    delete_chat(chat=trashed_chat)
    temporary_chat = create_chat(owner=victim, title=m["temporarytitle"], agents=[agent], temporary=True)
    with inside(temporary_chat.pk):
        send_message(chat=temporary_chat, content=m["temporarymessage"])
        temporary_run = str(Run.objects.get(chat_id=temporary_chat.pk).pk)
    block = memory.set_content(owner=victim, label=MEMORY_LABEL, content=m["memoryentry"],
                               description=m["memorydescription"])
    remote = remotes.create_remote(owner=victim, name=m["remotename"], url=f"https://{m['remotehost']}.example/mcp",
                                   headers={"Authorization": f"Bearer {m['remoteheader']}"})
    remotes.attach_remote(chat=chat, remote=remote, thread=question.thread)
    with override_settings(HUB_ALLOW_INVITES=True):
        invitation = create_invitation(user=victim, note=m["invitationnote"])[0]
    world = World(
        victim=victim, attacker=attacker, chat=chat, trashed_chat=trashed_chat, temporary_chat=temporary_chat,
        temporary_run=temporary_run,
        thread=question.thread,
        question=question, reply=finished_run.reply_message, finished_run=finished_run,
        queued_run=Run.objects.get(trigger_message=follow_up), agent=agent, entry=block.entries.get(),
        document=search.index_shared(owner=victim, label=m["documentlabel"], key=m["documentkey"],
                                     content=m["documentcontent"]),
        key=secrets.store_key(owner=victim, provider="openai", key=f"sk-{m['providerkey']}"),
        remote=remote, token=create_api_token(user=victim, name=m["tokenname"])[0], invitation=invitation,
        own_chat=create_chat(owner=attacker, title="Mine"),
        own_remote=remotes.create_remote(owner=attacker, name="Mine", url="https://tools.example/mcp"),
    )
    sent = SimpleUploadedFile(f"{m['filename']}.txt", m["filecontent"].encode())
    world.sent_file = upload_file(chat=chat, upload=sent)
    send_message(chat=chat, thread=question.thread, content=m["question"], kind="note", files=[str(world.sent_file.pk)])
    world.unsent_file = upload_file(chat=chat, upload=SimpleUploadedFile(f"{m['unsentname']}.txt", b"unsent"))
    from chats.transfers import jobs

    world.export = jobs.start_export(owner=victim, format="hub")
    jobs.run_transfer(transfer_id=str(world.export.pk))
    world.import_job = jobs.start_import(owner=victim, upload=SimpleUploadedFile("conversations.json", b"[]"))
    from chats.services import share_chat

    world.share = share_chat(chat=chat)
    from chats.services import create_folder, organize_chat

    world.folder = create_folder(owner=victim, name=m["foldername"], instructions=m["folderinstructions"])
    organize_chat(chat=chat, folder=world.folder, tags=[m["tagname"]], pinned=True)
    assert world.reply is not None and world.queued_run.status == Run.Status.QUEUED
    return world


def http_clients(world: World) -> dict[str, Client]:
    """The attacker with a session (pages, page JSON and the API) and with an API token (the API)."""
    from hub.services import create_api_token

    session = Client(raise_request_exception=False)
    session.force_login(world.attacker)
    raw = create_api_token(user=world.attacker, name="attacker")[1]
    token = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {raw}"})
    owner = Client(raise_request_exception=False)
    owner.force_login(world.victim)
    return {"session": session, "token": token, "victim": owner}


@pytest.fixture(scope="class")
def world(django_db_setup, django_db_blocker):
    """One set of objects for the HTTP tests, rolled back after the last of them (each test's own
    changes are rolled back after it, as usual). Class-scoped, not module-scoped: it must be gone
    before the socket test, whose rows are committed."""
    with django_db_blocker.unblock(), transaction.atomic():
        made = build_world()
        made.clients = http_clients(made)
        yield made
        transaction.set_rollback(True)


def snapshot(user) -> dict[str, list[str]]:
    """Every row the user owns, as plain values: counts, texts, statuses, everything."""
    from agents_app.models import Agent, ProviderKey, Remote, Run
    from chats.models import Chat, ContextBlock, Membership, MemoryEntry, Message, SharedDocument, ShareLink, Thread
    from hub.models import ApiToken, Invitation

    owned = {
        "chats": Chat.objects.filter(owner=user), "threads": Thread.objects.filter(chat__owner=user),
        "messages": Message.objects.filter(chat__owner=user), "members": Membership.objects.filter(chat__owner=user),
        "agents": Agent.objects.filter(owner=user), "runs": Run.objects.filter(chat__owner=user),
        "blocks": ContextBlock.objects.filter(owner=user), "entries": MemoryEntry.objects.filter(block__owner=user),
        "documents": SharedDocument.objects.filter(owner=user), "remotes": Remote.objects.filter(owner=user),
        "keys": ProviderKey.objects.filter(owner=user), "tokens": ApiToken.objects.filter(user=user),
        "invitations": Invitation.objects.filter(created_by=user),
        "shares": ShareLink.objects.filter(chat__owner=user),
    }
    return {name: [repr(row) for row in rows.order_by("pk").values()] for name, rows in owned.items()}


# --- Routes ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    route: str  # the whole pattern as written, e.g. "api/v1/chats/<str:chat_id>/"
    params: tuple[str, ...]
    is_regex: bool

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/v1/")

    def path(self, values: dict) -> str:
        return "/" + re.sub(r"<(?:[^>:]+:)?([^>]+)>", lambda m: str(values[m.group(1)]), self.route)


def routes_of(patterns, prefix: str = "", params: tuple = (), is_regex: bool = False) -> list[Route]:
    """Every pattern under patterns, include()s followed, with the parameters of its whole path."""
    found = []
    for entry in patterns:
        route = prefix + str(entry.pattern)
        names = params + tuple(entry.pattern.regex.groupindex)
        regex = is_regex or isinstance(entry.pattern, RegexPattern)
        if isinstance(entry, URLResolver):
            found += routes_of(entry.url_patterns, route, names, regex)
        else:
            found.append(Route(route, names, regex))
    return found


def http_routes() -> list[Route]:
    return routes_of(get_resolver().url_patterns)


def socket_routes() -> list[Route]:
    from chats.routing import websocket_urlpatterns

    return routes_of(websocket_urlpatterns)


def exclusion_of(route: Route) -> str | None:
    for entry in EXCLUDED:
        if route.route == entry or (entry.endswith("*") and route.route.startswith(entry[:-1])):
            return entry
    return None


def swept(routes: list[Route], *, with_params: bool) -> list[Route]:
    """The routes to sweep: not excluded, and (with parameters) all of them mapped; the first test
    fails for any other."""
    return [r for r in routes if exclusion_of(r) is None and bool(r.params) == with_params
            and all(name in PATH_VALUES for name in r.params)]


def test_every_route_is_swept_or_excluded_for_a_reason():
    routes = http_routes() + socket_routes()
    problems = []
    for route in routes:
        if exclusion_of(route) is not None:
            continue
        if route.is_regex:
            problems.append(f"{route.route}: a regex route cannot be filled in; write it with path(), or add it "
                            "to EXCLUDED with the reason")
        problems += [f"{route.route}: map the path parameter {name!r} in PATH_VALUES to the victim's object "
                     "(and give the victim one in build_world)" for name in route.params if name not in PATH_VALUES]
    in_use = {name for route in routes for name in route.params}
    problems += [f"EXCLUDED[{entry!r}] matches no route any more: remove it"
                 for entry in EXCLUDED if not any(exclusion_of(r) == entry for r in routes)]
    problems += [f"OWN_SLOT[{entry!r}] is no route any more: remove it"
                 for entry in OWN_SLOT if entry not in {r.route for r in routes}]
    problems += [f"PATH_VALUES[{name!r}] names no route's parameter any more: remove it"
                 for name in PATH_VALUES if name not in in_use]
    assert not problems, "\n".join(problems)
    # The walk reaches into every include(): the API's, both apps' and the websocket router's.
    assert {"api/v1/chats/<str:chat_id>/messages/<str:message_id>/", "chats/<str:chat_id>/state/",
            "agents/<int:agent_id>/", "ws/chats/<str:chat_id>/"} <= {r.route for r in routes}


# --- Requests and answers ---------------------------------------------------------------------

def plausible_body(world: World) -> dict:
    """Every field a route here reads, with the victim's ids where a field names an object."""
    return {
        "title": "hijacked", "description": "hijacked", "content": "hijacked", "text": "hijacked",
        "name": "hijacked", "note": "hijacked", "key": "sk-hijacked-0000", "model": "test:scripted",
        "url": "https://tools.example/mcp", "label": MEMORY_LABEL, "provider": "openai",
        "chat_id": str(world.chat.pk), "thread_id": world.thread.pk, "message_id": world.question.pk,
        "agent_id": world.agent.pk, "remote_id": world.remote.pk,
    }


def send(client: Client, method: str, path: str, body_kind: str | None = None, body: dict | None = None):
    if body_kind == "json":
        return client.generic(method, path, json.dumps(body), content_type="application/json")
    if body_kind == "form":
        return client.generic(method, path, urlencode(body, doseq=True),
                              content_type="application/x-www-form-urlencoded")
    return client.generic(method, path)


def read(response) -> str:
    """The whole answer as text: the headers and the body. A stream is not read (it may not end)."""
    headers = "\n".join(f"{name}: {value}" for name, value in response.items())
    if response.streaming:
        response.close()
        return headers
    return headers + "\n" + response.content.decode("utf-8", "replace")


def leaks(response) -> list[str]:
    text = read(response)
    return [name for name, marker in MARKERS.items() if marker in text]


def describe(response) -> str:
    """A failing answer, briefly (with the exception of a 500)."""
    detail = "" if response.streaming else response.content[:160].decode("utf-8", "replace")
    exc = getattr(response, "exc_info", None)
    return f"{response.status_code}{' (a stream)' if response.streaming else ''} {detail!r}" + (
        f" raised {exc[1]!r}" if exc else "")


def variants(route: Route, world: World) -> list[tuple[dict, dict | None]]:
    """Each way to fill the route with the victim's ids, with its twin naming nothing (None: no twin).

    A route with a chat id and another id is also tried with the attacker's own chat and the
    victim's other ids: a lookup must be scoped to the chat, not just the chat to the user.
    """
    choices = [[(name, value) for value in PATH_VALUES[name][0](world)] for name in route.params]
    filled = [dict(combo) for combo in product(*choices)]
    if "chat_id" in route.params and len(route.params) > 1:
        filled += [{**values, "chat_id": world.own_chat.pk} for values in filled
                   if values["chat_id"] == world.chat.pk]
    if route.route in OWN_SLOT:
        return [(values, None) for values in filled]
    own = str(world.own_chat.pk)
    return [(values, {name: value if str(value) == own else PATH_VALUES[name][1] for name, value in values.items()})
            for values in filled]


def clients_for(route: Route, world: World) -> dict[str, Client]:
    names = ("session", "token") if route.is_api else ("session",)
    return {name: world.clients[name] for name in names}


def body_and_query_cases(world: World) -> list[tuple[str, str, str | None, dict | None, int]]:
    """Routes that take another object's id in the body or the query string, on the attacker's own
    chat or remote, with the victim's ids: (method, path, body kind, body, the expected status).

    A foreign id in a body is a bad field (400) on the API and on the chat page's JSON, as an
    unknown one is; where a view answers 404 for it, that is as good (no existence leak either way).
    """
    from chats.services import export_chat

    v, own_chat, own_remote = world, str(world.own_chat.pk), world.own_remote.pk
    victim_chat, victim_thread, victim_agent = str(v.chat.pk), v.thread.pk, v.agent.pk
    export = {**export_chat(world.own_chat), "members": [{"agent_id": victim_agent, "name": "anyone"}],
              "messages": [{"id": 1, "sender": {"type": "agent", "agent_id": victim_agent, "name": "anyone"},
                            "content": "hello"}]}
    return [
        ("POST", f"/api/v1/remotes/{own_remote}/attach/", "json", {"chat_id": victim_chat}, 400),
        ("POST", f"/api/v1/remotes/{own_remote}/attach/", "json",
         {"chat_id": own_chat, "thread_id": victim_thread}, 400),
        ("POST", f"/agents/remotes/{own_remote}/attach/", "form", {"chat_id": victim_chat}, 404),
        ("POST", f"/agents/remotes/{own_remote}/attach/", "form", {"chat_id": own_chat, "thread_id": victim_thread},
         404),
        ("POST", f"/chats/{own_chat}/remotes/", "json", {"remote_id": v.remote.pk}, 400),
        ("POST", f"/chats/{own_chat}/remotes/", "json", {"remote_id": own_remote, "thread_id": victim_thread}, 404),
        ("POST", f"/chats/{own_chat}/members/", "json", {"agent_id": victim_agent}, 400),
        ("POST", f"/api/v1/chats/{own_chat}/members/", "json", {"agent_id": victim_agent}, 400),
        ("POST", "/chats/new/", "json", {"title": "new", "agents": [victim_agent]}, 400),
        ("POST", "/chats/new/", "form", {"title": "new", "agents": victim_agent}, 400),
        ("POST", f"/api/v1/chats/{own_chat}/fork/", "json", {"message_id": v.question.pk}, 400),
        ("POST", f"/api/v1/chats/{own_chat}/messages/", "json", {"content": "hi", "thread_id": victim_thread}, 400),
        # An import names agents by id: the victim's is not among those the attacker may use.
        ("POST", "/api/v1/chats/import/", "json", export, 201),
        ("GET", f"/chats/{own_chat}/messages/?ids={v.question.pk},{v.reply.pk}", None, None, 200),
        ("GET", f"/chats/{own_chat}/messages/?thread={victim_thread}", None, None, 404),
        ("GET", f"/chats/{own_chat}/messages/?after=0", None, None, 200),
        ("GET", f"/chats/{own_chat}/messages/?before={v.reply.pk + 1}", None, None, 200),
        ("GET", f"/api/v1/chats/{own_chat}/messages/?after=0", None, None, 200),
        ("GET", f"/api/v1/search/documents/?label={MARKERS['documentlabel']}&q={MARK}", None, None, 200),
        # A folder or a tag of the victim's, to file the attacker's chat in or to filter by.
        ("POST", f"/chats/{own_chat}/organize/", "json", {"folder_id": v.folder.pk}, 400),
        ("PATCH", f"/api/v1/chats/{own_chat}/", "json", {"folder": v.folder.pk}, 400),
        ("GET", f"/directory/?folder={v.folder.pk}", None, None, 404),
        ("GET", f"/directory/?tag={MARKERS['tagname']}", None, None, 404),
        ("GET", f"/api/v1/chats/?folder={v.folder.pk}", None, None, 404),
        ("GET", f"/api/v1/chats/?tag={MARKERS['tagname']}", None, None, 404),
    ]


# Query strings for the routes without parameters: a search for every marker at once, the trash.
LIST_QUERIES = ("", f"?q={MARK}", f"?q={MARK}&trash=1", f"?q={MARK}&label={MARKERS['documentlabel']}")


@pytest.mark.django_db
class TestAnotherUsersIds:
    """Over HTTP, on one set of objects for the class (see world)."""

    def test_another_users_ids_in_every_path_answer_404_and_change_nothing(self, world, settings):
        # The sweep sends more than a user's minute of sends: a 429 would hide the answer.
        settings.HUB_API_SEND_RATE = "10000/min"
        before = snapshot(world.victim)
        body = plausible_body(world)
        problems, looked_up = [], set()
        routes = swept(http_routes(), with_params=True)
        for route in routes:
            allowed = OWN_SLOT.get(route.route, {404, 405})
            for (values, twin), (who, client), (method, body_kind) in product(
                    variants(route, world), clients_for(route, world).items(), REQUESTS):
                path = route.path(values)
                where = f"{method}{' ' + body_kind if body_kind else ''} {path} as the attacker ({who})"
                response = send(client, method, path, body_kind, body)
                if response.status_code not in allowed:
                    problems.append(f"{where}: {describe(response)}, expected one of {sorted(allowed)}")
                if found := leaks(response):
                    problems.append(f"{where}: the answer holds the victim's {', '.join(found)}")
                if response.status_code == 404:
                    looked_up.add(route.route)
                if twin is not None and who == "session":
                    other = send(client, method, route.path(twin), body_kind, body)
                    if other.status_code != response.status_code:
                        problems.append(f"{where}: {response.status_code}, but {other.status_code} for an id that "
                                        "names nothing: the answer tells the victim's ids apart")
        problems += [f"{route.route}: no request answered 404; does it look the id up?"
                     for route in routes if route.route not in looked_up and route.route not in OWN_SLOT]
        assert not problems, "\n".join(problems)
        assert snapshot(world.victim) == before
        assert len(routes) >= 40

    def test_another_users_ids_in_a_body_or_query_are_refused(self, world):
        before = snapshot(world.victim)
        problems = []
        for method, path, body_kind, body, expected in body_and_query_cases(world):
            who_all = ("session", "token") if path.startswith("/api/v1/") else ("session",)
            for who in who_all:
                response = send(world.clients[who], method, path, body_kind, body)
                where = f"{method} {path} {json.dumps(body) if body else ''} as the attacker ({who})"
                if response.status_code != expected:
                    problems.append(f"{where}: {describe(response)}, expected {expected}")
                if found := leaks(response):
                    problems.append(f"{where}: the answer holds the victim's {', '.join(found)}")
        assert not problems, "\n".join(problems)
        assert snapshot(world.victim) == before

    def test_pages_and_lists_show_nothing_of_another_user(self, world, settings):
        settings.HUB_ALLOW_INVITES = True  # so the attacker has an invitations page, without the victim's
        before = snapshot(world.victim)
        problems = []
        routes = swept(http_routes(), with_params=False)
        for route, query in product(routes, LIST_QUERIES):
            for who, client in clients_for(route, world).items():
                response = send(client, "GET", route.path({}) + query)
                where = f"GET {route.path({}) + query} as the attacker ({who})"
                if response.status_code >= 500:
                    problems.append(f"{where}: {describe(response)}")
                if found := leaks(response):
                    problems.append(f"{where}: the answer holds the victim's {', '.join(found)}")
        assert not problems, "\n".join(problems)
        assert snapshot(world.victim) == before
        assert {"", "directory/", "search/", "agents/", "memory/", "settings/tokens/", "api/v1/search/messages/"} <= {
            r.route for r in routes}

    def test_the_markers_do_show_to_their_owner(self, world, settings):
        """The checks above can fail: the victim's own answers hold the markers they look for."""
        settings.HUB_ALLOW_INVITES = True
        owner = world.clients["victim"]
        state = read(owner.get(f"/chats/{world.chat.pk}/state/"))
        assert all(MARKERS[name] in state for name in ("chattitle", "question", "reply", "threadtitle", "agentname"))
        assert MARKERS["memoryentry"] in read(owner.get("/memory/"))
        download = owner.get(f"/files/{world.sent_file.pk}/")
        assert MARKERS["filename"] in download["Content-Disposition"]
        assert MARKERS["filecontent"].encode() in b"".join(download.streaming_content)
        assert MARKERS["unsentname"] in read(owner.get(f"/api/v1/chats/{world.chat.pk}/files/"))
        assert MARKERS["remotehost"] in read(owner.get("/api/v1/remotes/"))
        assert MARKERS["tokenname"] in read(owner.get("/settings/tokens/"))
        assert MARKERS["invitationnote"] in read(owner.get("/settings/invitations/"))
        found = read(owner.get(f"/api/v1/search/messages/?q={MARK}"))
        assert MARKERS["question"] in found or MARKERS["chattitle"] in found


# --- Websockets --------------------------------------------------------------------------------

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@dataclass
class SocketWorld:
    world: World
    attacker_cookie: str
    victim_cookie: str


@pytest.fixture
def socket_world():
    """The same objects, committed (the consumer reads them from its own threads), and the session
    cookies a browser would send. As in tests/chats/conftest.py: a channel layer of the test's own
    (channels-redis binds one to an event loop), and the frame threads' connections closed after."""
    from channels.layers import channel_layers
    from django.db import connections

    from chats.consumers import FRAME_THREADS

    channel_layers.backends.clear()
    world = build_world()
    cookies = []
    for user in (world.attacker, world.victim):
        client = Client()
        client.force_login(user)
        cookies.append(f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}")
    yield SocketWorld(world, *cookies)
    channel_layers.backends.clear()
    FRAME_THREADS.run_on_each(connections.close_all)


async def open_socket(path: str, cookie: str):
    """Through the whole ASGI stack: the Origin check, the session cookie, the router, the consumer."""
    from hub.asgi import application

    headers = [ORIGIN, (b"host", b"127.0.0.1:8000"), (b"cookie", cookie.encode())]
    socket = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await socket.connect(timeout=5)
    return socket, connected, code


async def frames_until_error(socket) -> list[dict]:
    """Every frame up to and including the next error (events of the attacker's own come along)."""
    frames = []
    while not frames or frames[-1].get("type") != "error":
        frames.append(await socket.receive_json_from(timeout=5))
    return frames


async def drain(socket) -> list[dict]:
    frames = []
    while not await socket.receive_nothing(timeout=0.3):
        frames.append(await socket.receive_json_from(timeout=1))
    return frames


def marked(frames: list[dict]) -> list[str]:
    text = json.dumps(frames)
    return [name for name, marker in MARKERS.items() if marker in text]


@pytest.mark.django_db(transaction=True)
async def test_sockets_refuse_another_users_chat_ids_and_events(socket_world):
    from chats import memory
    from chats.services import update_chat

    world, cookie = socket_world.world, socket_world.attacker_cookie
    before = await database_sync_to_async(snapshot)(world.victim)
    for route in swept(socket_routes(), with_params=True):
        for values, _ in variants(route, world):
            socket, connected, _ = await open_socket(route.path(values), cookie)
            assert not connected, f"{route.path(values)} let the attacker in"

    # The attacker's own chat opens (so the refusals above are about whose chat it is); its frames
    # that name the victim's objects are answered not_found and do nothing.
    own, connected, _ = await open_socket(f"/ws/chats/{world.own_chat.pk}/", cookie)
    assert connected
    for frame in ({"type": "message.edit", "message_id": world.question.pk, "content": "hijacked"},
                  {"type": "message.edit", "message_id": world.reply.pk, "content": "hijacked"},
                  {"type": "run.cancel", "run_id": str(world.queued_run.pk)},
                  {"type": "message.send", "content": "hijacked", "thread_id": world.thread.pk}):
        await own.send_json_to(frame)
        frames = await frames_until_error(own)
        assert frames[-1]["error"]["code"] == "not_found", (frame, frames[-1])
        assert marked(frames) == [], frame
    assert await database_sync_to_async(snapshot)(world.victim) == before

    # What the victim does meanwhile reaches the victim's tabs, and none of the attacker's.
    directory, connected, _ = await open_socket("/ws/directory/", cookie)
    victims_tab, victim_connected, _ = await open_socket(f"/ws/chats/{world.chat.pk}/", socket_world.victim_cookie)
    assert connected and victim_connected
    await database_sync_to_async(memory.append)(owner=world.victim, label=MEMORY_LABEL, text=MARKERS["latermemory"])
    await database_sync_to_async(update_chat)(chat=world.chat, description=MARKERS["laterdescription"])
    heard = []
    while not {"latermemory", "laterdescription"} <= set(marked(heard)):
        heard.append(await victims_tab.receive_json_from(timeout=5))
    for socket in (own, directory):
        assert marked(await drain(socket)) == []
    for socket in (own, directory, victims_tab):
        await socket.disconnect()
