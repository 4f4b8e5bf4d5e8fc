"""The hub's own provider keys never go to a server a user chose.

Any user may give an agent a base URL. The server's keys (OPENAI_API_KEY, ANTHROPIC_API_KEY,
OLLAMA_API_KEY) go only to the server's own base URL; a capture server standing in for a user's
server records every request it gets, and none may carry the server's key.
"""

import pytest

from agents_app import secrets
from agents_app.fake_provider import FakeProvider
from agents_app.services import create_agent
from chats.models import Message
from chats.services import send_message

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_KEYS = {"openai": "sk-server-openai-key-7777", "anthropic": "sk-ant-server-key-7777",
               "ollama": "sk-server-ollama-key-7777"}
ENVIRONMENT = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_API_KEY",
               "OLLAMA_BASE_URL")


@pytest.fixture
def servers(monkeypatch, settings):
    """(the operator's model server, configured in the environment with its keys; a capture server)."""
    settings.HUB_MODEL_MAX_RETRIES = 0
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    with FakeProvider() as home, FakeProvider() as capture:
        monkeypatch.setenv("OPENAI_BASE_URL", home.openai_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", home.url)
        monkeypatch.setenv("OLLAMA_BASE_URL", home.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEYS["openai"])
        monkeypatch.setenv("ANTHROPIC_API_KEY", SERVER_KEYS["anthropic"])
        monkeypatch.setenv("OLLAMA_API_KEY", SERVER_KEYS["ollama"])
        home.script(text="From the operator's server.")
        capture.script(text="From the user's server.")
        yield home, capture


def sent_keys(server) -> list[str]:
    """Every credential a server received, in any header a provider SDK puts one in."""
    return [value for request in server.requests for name, value in request.headers.items()
            if name in ("authorization", "x-api-key", "api-key")]


def answer(agent, run_now) -> Message:
    send_message(chat=agent.main_chat, content="Ada")
    run_now()
    return Message.objects.get(sender_agent=agent, kind="message")


@pytest.mark.parametrize("provider, url", [
    ("openai", "openai_url"), ("anthropic", "url"), ("ollama", "openai_url"),
])
def test_an_agent_on_a_users_server_never_gets_the_servers_key(servers, user, run_now, provider, url):
    home, capture = servers
    agent = create_agent(owner=user, name="Mine", model=f"{provider}:m", base_url=getattr(capture, url))

    reply = answer(agent, run_now)

    assert reply.content == "From the user's server."
    assert capture.requests and not home.requests
    assert not any(SERVER_KEYS[provider] in key for key in sent_keys(capture))
    assert not any(key in value for value in sent_keys(capture) for key in SERVER_KEYS.values())


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_an_agent_on_the_servers_own_base_url_gets_the_servers_key(servers, user, run_now, provider):
    home, capture = servers
    agent = create_agent(owner=user, name="Default", model=f"{provider}:m")

    assert answer(agent, run_now).content == "From the operator's server."
    assert any(SERVER_KEYS[provider] in key for key in sent_keys(home)) and not capture.requests


def test_a_shared_agent_on_another_server_does_not_get_the_servers_key_either(servers, user, run_now):
    home, capture = servers
    shared = create_agent(owner=None, name="Shared", model="openai:m", base_url=capture.openai_url)
    from chats.services import create_chat

    chat = create_chat(owner=user, title="With the shared agent", agents=[shared])
    send_message(chat=chat, content="Ada")
    run_now()

    assert capture.requests and not any(SERVER_KEYS["openai"] in key for key in sent_keys(capture))


def test_the_owners_own_key_goes_to_the_server_they_chose(servers, user, run_now):
    home, capture = servers
    secrets.store_key(owner=user, provider="openai", key="sk-alice-own-key-5555")
    agent = create_agent(owner=user, name="Mine", model="openai:m", base_url=capture.openai_url)

    answer(agent, run_now)

    assert sent_keys(capture) == ["Bearer sk-alice-own-key-5555"]


def test_openai_itself_typed_by_a_user_does_not_borrow_the_servers_key(servers, user, run_now):
    """The server's key belongs to its own base URL (here a local server), not to api.openai.com."""
    home, capture = servers
    agent = create_agent(owner=user, name="Direct", model="openai:gpt-4.1-mini", base_url="https://api.openai.com/v1")

    reply = answer(agent, run_now)

    assert reply.status == "error"
    assert reply.data["error"] == "No OpenAI API key is set: add yours under Agents → Provider keys."
    assert not home.requests and not capture.requests
