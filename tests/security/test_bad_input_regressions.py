"""Bad bytes get a 400, never a 500: each reproduction named, and each 500 the property test found.

Each of the first group answered 500 (or closed the socket with 1011) before hub/input.py: U+0000
and lone surrogates reached PostgreSQL, NaN reached a jsonb column. The rest were found by
tests/security/test_bad_input.py.
"""

import json

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from agents_app.models import Agent
from chats.models import Chat, ContextBlock, Message
from hub import input as hub_input
from hub.errors import InvalidInput
from tests.api.conftest import running_hub
from tests.security.bad_input_world import fresh_channel_layer, socket_frame_thread_disconnected  # noqa: F401

pytestmark = pytest.mark.usefixtures("fresh_channel_layer")
NUL = hub_input.NUL_PROBLEM


@pytest.fixture
def api(user):
    from hub.services import create_api_token

    token = create_api_token(user=user, name="regressions")[1]
    return Client(raise_request_exception=False, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def page(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def post_json(client, path, body: str | dict):
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, text, content_type="application/json", headers={"Accept": "application/json"})


def refused(response, field: str, problem: str = NUL) -> dict:
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["fields"] == {field: [problem]}
    assert error["message"] == f"{field}: {problem}"
    return error


# --- The reproductions of the issue ---------------------------------------------------------

@pytest.mark.django_db
def test_a_nul_in_a_memory_label_in_the_path_answers_400_and_makes_no_block(api, user):
    refused(api.put("/api/v1/memory/a%00b/", json.dumps({"content": "x"}), content_type="application/json"), "path")
    assert not ContextBlock.objects.filter(owner=user).exists()


@pytest.mark.django_db
def test_a_nul_in_the_directory_search_answers_400_naming_q(page):
    refused(page.get("/directory/?q=a%00b", headers={"Accept": "application/json"}), "q")


@pytest.mark.django_db
def test_a_nul_in_a_query_key_answers_400_naming_the_query(page):
    refused(page.get("/directory/?a%00b=1", headers={"Accept": "application/json"}), "query")


@pytest.mark.django_db
def test_a_new_chat_titled_with_nul_answers_400_and_makes_no_chat(page, user):
    refused(post_json(page, "/chats/new/", {"title": "a\u0000b"}), "title")
    assert not Chat.objects.filter(owner=user).exists()


@pytest.mark.django_db
def test_renaming_a_chat_with_nul_answers_400_and_keeps_its_title(page, chat):
    refused(post_json(page, f"/chats/{chat.pk}/settings/", {"title": "a\u0000b"}), "title")
    chat.refresh_from_db()
    assert chat.title == "Plans"


@pytest.mark.django_db
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_an_agent_with_a_temperature_that_is_not_finite_answers_400_and_makes_no_agent(api, user, number):
    body = '{"name": "Hot", "model": "test:scripted", "settings": {"temperature": ' + number + "}}"
    refused(post_json(api, "/api/v1/agents/", body), "settings.temperature", f"must be a finite number, not {number}")
    assert not Agent.objects.filter(owner=user, name="Hot").exists()


@pytest.mark.django_db
def test_an_agent_with_a_nul_in_a_settings_key_answers_400_and_makes_no_agent(api, user):
    body = {"name": "Keys", "model": "test:scripted", "settings": {"a\u0000": 1}}
    refused(post_json(api, "/api/v1/agents/", body), "settings", f"keys {NUL}")
    assert not Agent.objects.filter(owner=user, name="Keys").exists()


async def open_chat_socket(user, chat_id):
    from chats.routing import websocket_urlpatterns

    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chats/{chat_id}/")
    socket.scope["user"] = user
    connected, _ = await socket.connect(timeout=5)
    assert connected
    return socket


async def next_of_type(socket, wanted: str) -> dict:
    while True:
        event = await socket.receive_json_from(timeout=5)
        if event["type"] == wanted:
            return event


@pytest.mark.django_db(transaction=True)
async def test_a_frame_with_nul_gets_an_error_frame_and_the_socket_stays_open(user, chat):
    socket = await open_chat_socket(user, chat.pk)
    await socket.send_to(text_data='{"type":"message.send","content":"nul\\u0000byte","client_id":"c-nul"}')
    error = await next_of_type(socket, "error")
    assert error["client_id"] == "c-nul"
    assert error["error"]["fields"] == {"content": [NUL]}
    await socket.send_json_to({"type": "message.send", "content": "still here", "client_id": "c-ok"})
    created = await next_of_type(socket, "message.created")
    assert created["client_id"] == "c-ok" and created["message"]["content"] == "still here"
    assert await database_sync_to_async(list)(Message.objects.values_list("content", flat=True)) == ["still here"]
    await socket.disconnect()


# --- The rest of the rules -------------------------------------------------------------------

@pytest.mark.django_db
def test_a_lone_surrogate_in_a_page_json_body_answers_400(page, chat):
    refused(post_json(page, f"/chats/{chat.pk}/settings/", '{"description": "half \\ud83d a smile"}'),
            "description", "must not contain a lone surrogate (U+D83D): it is not a character")


@pytest.mark.django_db
def test_a_lone_surrogate_in_an_api_body_answers_400(api, chat):
    response = post_json(api, f"/api/v1/chats/{chat.pk}/messages/", '{"content": "\\udc00"}')
    refused(response, "content", "must not contain a lone surrogate (U+DC00): it is not a character")
    assert not Message.objects.filter(chat=chat).exists()


@pytest.mark.django_db
def test_a_whole_smile_written_as_a_surrogate_pair_is_taken(page, chat):
    response = post_json(page, f"/chats/{chat.pk}/settings/", '{"description": "a \\ud83d\\ude00"}')
    assert response.status_code == 200
    chat.refresh_from_db()
    assert chat.description == "a 😀"


@pytest.mark.django_db
def test_a_form_with_nul_answers_a_short_plain_page(page, user):
    response = page.post("/agents/new/", {"name": "a\x00b", "model": "test:scripted", "reply_policy": "always",
                                          "recovery_policy": "continue"})
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == f"Bad request. name: {NUL}\n"
    assert not Agent.objects.filter(owner=user).exists()


@pytest.mark.django_db
def test_a_nul_in_a_page_path_answers_400(page):
    response = page.get("/chats/a%00b/")
    assert response.status_code == 400 and f"path: {NUL}" in response.content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("frame", [{"bytes_data": b"\x00\x01"}, {"text_data": '{"type": "message.send", "x": NaN}'},
                                   {"text_data": '["\\ud800"]'}, {"text_data": '{"type": ["message.send"]}'}])
async def test_frames_that_are_binary_nan_a_surrogate_or_an_odd_type_get_an_error_and_the_socket_stays_open(
        user, chat, frame):
    socket = await open_chat_socket(user, chat.pk)
    await socket.send_to(**frame)
    assert (await next_of_type(socket, "error"))["error"]["code"] == "invalid"
    await socket.send_json_to({"type": "message.send", "content": "after", "client_id": "c-after"})
    assert (await next_of_type(socket, "message.created"))["client_id"] == "c-after"
    await socket.disconnect()


# --- Found by the property test ----------------------------------------------------------------

@pytest.mark.django_db
def test_an_over_long_chat_picture_answers_400_naming_picture(page, user, chat):
    refused(post_json(page, "/chats/new/", {"picture": "x" * 501}), "picture", "at most 500 characters")
    refused(post_json(page, f"/chats/{chat.pk}/settings/", {"picture": "x" * 501}), "picture", "at most 500 characters")
    assert list(Chat.objects.filter(owner=user).values_list("picture", flat=True)) == [""]


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["threads.0.id", "messages.0.id", "messages.0.thread", "messages.0.reply_to"])
def test_an_import_naming_an_id_with_an_object_answers_400(api, user, chat, where):
    from chats.services import export_chat, send_message

    thread_message = send_message(chat=chat, content="in a thread", new_thread_title="T")
    send_message(chat=chat, content="answer", thread=thread_message.thread)
    export = export_chat(chat)
    export["messages"].sort(key=lambda m: m["thread"] is None)  # the threaded ones first
    target = export
    *steps, last = [int(step) if step.isdigit() else step for step in where.split(".")]
    for step in steps:
        target = target[step]
    target[last] = {"x": "y"}
    field = where.replace(".0.", "[0].")
    refused(post_json(api, "/api/v1/chats/import/", export), field, "must be a number or a text")
    assert Chat.objects.filter(owner=user).count() == 1


@pytest.mark.django_db
def test_an_import_naming_an_agent_with_an_object_imports_without_it(api, user, chat, make_agent):
    from chats.services import export_chat

    export = export_chat(chat)
    export["members"] = [{"agent_id": {"x": "y"}, "name": "nobody here"}]
    assert post_json(api, "/api/v1/chats/import/", export).status_code == 201


@pytest.mark.django_db
def test_a_huge_id_in_a_messages_refetch_is_left_out(page, chat):
    from chats.services import send_message

    message = send_message(chat=chat, content="known")
    response = page.get(f"/chats/{chat.pk}/messages/?ids={message.pk},{10**30}", headers={"Accept": "application/json"})
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["messages"]] == [message.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("agent_id", [str(10**30), "9" * 5000])
def test_a_huge_agent_id_in_the_new_chat_form_answers_400_and_makes_no_chat(page, user, agent_id):
    response = page.post("/chats/new/", {"title": "Huge", "agents": agent_id})
    assert response.status_code == 400
    assert not Chat.objects.filter(owner=user).exists()


@pytest.mark.django_db
def test_a_directory_search_past_500_characters_answers_400_naming_q(page):
    refused(page.get("/directory/", {"q": "x" * 501}, headers={"Accept": "application/json"}), "q",
            "at most 500 characters")
    assert page.get("/directory/", {"q": "x" * 500}, headers={"Accept": "application/json"}).status_code == 200


# --- The rules themselves ----------------------------------------------------------------------

def test_a_text_is_refused_for_nul_or_a_lone_surrogate_and_nothing_else():
    assert hub_input.text_problem("plain, é, 😀, \u200b, \ufffd") is None
    assert hub_input.text_problem("a\x00b") == NUL
    assert hub_input.text_problem("\udfff") == "must not contain a lone surrogate (U+DFFF): it is not a character"


def test_json_is_parsed_strictly_naming_the_field():
    assert hub_input.loads('{"a": [1, 2.5, "😀"], "b": {"c": null}}') == {"a": [1, 2.5, "😀"], "b": {"c": None}}
    for text, field in [('{"a": {"b": [1, NaN]}}', "a.b[1]"), ('[Infinity]', "body[0]"), ('{"x": 1e999}', "x"),
                        ('{"a": "\\u0000"}', "a"), ('{"a": {"\\ud800": 1}}', "a")]:
        with pytest.raises(InvalidInput) as caught:
            hub_input.loads(text)
        assert list(caught.value.fields) == [field], text


def test_json_that_is_not_json_or_nested_past_the_stack_is_a_value_error():
    for text in ["{", "[" * 100_000 + "]" * 100_000, b"\xff"]:
        with pytest.raises(ValueError):
            hub_input.loads(text)


# --- Over real HTTP: Daphne hands these bytes to the hub as they came ---------------------------

@pytest.fixture(scope="module")
def live_hub(django_db_setup, django_db_blocker, tmp_path_factory):
    """The hub under Daphne for this module only: its worker would take the turns of later modules."""
    with running_hub(tmp_path_factory.mktemp("bad-input-hub")) as base:
        yield base


@pytest.mark.django_db(transaction=True)
def test_the_reproductions_answer_400_over_real_http(live_hub, user):
    import httpx

    from hub.services import create_api_token

    token = create_api_token(user=user, name="over http")[1]
    base = live_hub
    with httpx.Client(base_url=base, timeout=20, headers={"Authorization": f"Bearer {token}"}) as http:
        refused(http.put("/api/v1/memory/a%00b/", json={"content": "x"}), "path")
        nan = b'{"name": "Hot", "model": "test:scripted", "settings": {"temperature": NaN}}'
        refused(http.post("/api/v1/agents/", content=nan, headers={"Content-Type": "application/json"}),
                "settings.temperature", "must be a finite number, not NaN")
        refused(http.get("/api/v1/chats/", params={"q": "a\x00b"}), "q")
        # Refused before anything else is looked at: the log-in and the CSRF check come after.
        refused(http.get("/directory/", params={"q": "a\x00b"}, headers={"Accept": "application/json"}), "q")
        refused(http.post("/chats/new/", json={"title": "a\u0000b"}), "title")
    assert not ContextBlock.objects.filter(owner=user).exists() and not Agent.objects.filter(owner=user).exists()
    assert not Chat.objects.filter(owner=user).exists()
