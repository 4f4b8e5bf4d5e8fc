"""Outbound calls to addresses users type stay off the hub's own network (SSRF).

An agent's base URL and a remote's URL are refused when they lead to loopback, link-local,
private, multicast or unspecified addresses, at creation (a clear error on the field) and again on
every connection, redirects included, unless the operator allows them (HUB_OUTBOUND_ALLOW).
The fake model server stands for a server on the hub's own network: it listens on loopback.
"""

import asyncio
import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents_app import outbound, remotes
from agents_app.fake_provider import FakeProvider
from agents_app.services import create_agent
from chats import services as chat_services
from chats.models import Message
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db(transaction=True)

PRIVATE_URLS = [
    "http://127.0.0.1:8000/v1",
    "http://localhost:11434/v1",
    "http://[::1]:8000/v1",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/v1",
    "http://172.16.0.9/v1",
    "http://192.168.1.20:8080/v1",
    "http://100.64.0.1/v1",
    "http://0.0.0.0:8000/v1",
    "http://[::]/v1",
    "http://224.0.0.1/v1",
    "http://[fe80::1]/v1",
    "http://[fd00::1]/v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://2130706433/v1",  # 127.0.0.1 written as one number
    "http://0x7f.1/v1",
]


@pytest.fixture
def no_allowances(settings, monkeypatch):
    """The hub as deployed: nothing allowed beyond public addresses."""
    settings.HUB_OUTBOUND_ALLOW = []
    for name in outbound.ENVIRONMENT_URLS:
        monkeypatch.delenv(name, raising=False)
    settings.HUB_MODEL_MAX_RETRIES = 0


@pytest.mark.parametrize("address, public", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("::ffff:8.8.8.8", True),
    ("127.0.0.1", False), ("127.8.9.10", False), ("10.0.0.1", False), ("172.31.255.255", False),
    ("192.168.0.1", False), ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False),
    ("224.0.0.251", False), ("255.255.255.255", False), ("::1", False), ("::", False), ("fe80::1", False),
    ("fc00::1", False), ("ff02::1", False), ("::ffff:127.0.0.1", False), ("::ffff:10.0.0.1", False),
    ("64:ff9b::a9fe:a9fe", False),  # 169.254.169.254 through NAT64
    ("2002:7f00:1::", False),  # 127.0.0.1 through 6to4
])
def test_which_addresses_are_public(address, public):
    assert outbound.is_public(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_an_agent_on_a_private_address_is_refused_naming_the_field(no_allowances, user, url):
    with pytest.raises(InvalidInput) as refused:
        create_agent(owner=user, name="Probe", model="openai:m", base_url=url)
    assert list(refused.value.fields) == ["base_url"]
    assert "private or local address" in refused.value.fields["base_url"][0]


@pytest.mark.parametrize("url", PRIVATE_URLS[:6])
def test_a_remote_on_a_private_address_is_refused_naming_the_field(no_allowances, user, url):
    with pytest.raises(InvalidInput) as refused:
        remotes.create_remote(owner=user, name="Probe", url=url)
    assert list(refused.value.fields) == ["url"]


def test_the_api_and_the_pages_refuse_them_too(no_allowances, client, user):
    from hub.services import create_api_token

    _, token = create_api_token(user=user, name="t")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    agent = client.post("/api/v1/agents/", {"name": "P", "model": "openai:m", "base_url": "http://169.254.169.254/"},
                        content_type="application/json", **auth)
    assert agent.status_code == 400 and "base_url" in agent.json()["error"]["fields"]
    remote = client.post("/api/v1/remotes/", {"name": "P", "url": "http://127.0.0.1:6379/"},
                         content_type="application/json", **auth)
    assert remote.status_code == 400 and "url" in remote.json()["error"]["fields"]
    client.force_login(user)
    page = client.post("/agents/new/", {"name": "P", "model": "openai:m", "base_url": "http://10.0.0.5/v1",
                                        "reply_policy": "always", "recovery_policy": "continue"})
    assert page.status_code == 400 and "private or local address" in page.content.decode()
    assert not user.agents.filter(name="P").exists() and not user.remotes.exists()


def test_the_operator_allows_addresses_by_network_or_by_name(no_allowances, settings, user, monkeypatch):
    settings.HUB_OUTBOUND_ALLOW = ["10.0.0.0/8", "model-box.internal"]
    create_agent(owner=user, name="Lab", model="openai:m", base_url="http://10.1.2.3/v1")
    create_agent(owner=user, name="Box", model="openai:m", base_url="http://model-box.internal:8080/v1")
    with pytest.raises(InvalidInput):
        create_agent(owner=user, name="Other", model="openai:m", base_url="http://192.168.1.1/v1")
    # The environment's own model server is the operator's choice: always allowed (a local Ollama).
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:11434/v1")
    create_agent(owner=user, name="Ollama", model="ollama:llama3.2", base_url="http://127.0.0.1:11434/v1")


def test_only_staff_may_let_a_shared_agent_reach_private_addresses(no_allowances, user):
    shared = create_agent(owner=None, name="Lab model", model="openai:m", base_url="http://10.9.9.9/v1",
                          allow_private_network=True)
    assert shared.allow_private_network
    with pytest.raises(InvalidInput) as refused:
        create_agent(owner=user, name="Mine", model="openai:m", base_url="http://10.9.9.9/v1",
                     allow_private_network=True)
    assert "allow_private_network" in refused.value.fields


def test_an_address_that_became_private_is_refused_when_the_turn_connects(settings, user, run_now):
    """Checked at creation and at every connection: the DNS answer or the rules may change between."""
    settings.HUB_MODEL_MAX_RETRIES = 0
    with FakeProvider() as server:
        server.script(text="Internal data.")
        agent = create_agent(owner=user, name="Later", model="openai:m", base_url=server.openai_url)
        settings.HUB_OUTBOUND_ALLOW = []
        chat_services.send_message(chat=agent.main_chat, content="hello")
        assert run_now() == ["failed"]
        assert server.requests == []
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert reply.status == "error"
    assert reply.data["error"] == f"The model server at {server.openai_url.split('/')[2]} could not be reached."


def agent_calling_a_remote_tool(make_agent, user):
    script = {"reply": "Used {prompt}.", "chunk": 4, "tools": [{"name": "weather", "args": {"city": "Paris"}}]}
    return make_agent(user, name="Caller", settings={"script": script})


def test_a_remote_that_became_private_is_refused_and_the_error_says_only_that(settings, make_agent, user, run_now):
    agent = agent_calling_a_remote_tool(make_agent, user)
    remote = remotes.create_remote(owner=user, name="Weather", url="http://127.0.0.1:9/mcp")
    remotes.attach_remote(chat=agent.main_chat, remote=remote)
    settings.HUB_OUTBOUND_ALLOW = []
    chat_services.send_message(chat=agent.main_chat, content="Paris")

    assert run_now() == ["failed"]
    error = Message.objects.get(sender_agent=agent, kind="message").data["error"]
    assert error == "The remote tool server “Weather” could not be reached."


def test_an_unreachable_remote_says_could_not_be_reached_not_the_socket_error(make_agent, user, run_now):
    """A closed port says what any failed connection says, so errors cannot scan ports."""
    agent = agent_calling_a_remote_tool(make_agent, user)
    remote = remotes.create_remote(owner=user, name="Closed", url="http://127.0.0.1:9/mcp")
    remotes.attach_remote(chat=agent.main_chat, remote=remote)
    chat_services.send_message(chat=agent.main_chat, content="Paris")

    assert run_now() == ["failed"]
    error = Message.objects.get(sender_agent=agent, kind="message").data["error"]
    assert error == "The remote tool server “Closed” could not be reached."


class Redirector(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.target)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_redirect_to_a_private_address_is_refused(settings):
    """The first hop is allowed (127.0.0.2 only); the redirect leads to 127.0.0.1, which is not."""
    with FakeProvider() as inside:
        Redirector.target = inside.openai_url + "/models"
        server = ThreadingHTTPServer(("127.0.0.2", 0), Redirector)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            settings.HUB_OUTBOUND_ALLOW = ["127.0.0.2/32"]

            async def follow():
                async with outbound.guarded_client(follow_redirects=True) as client:
                    return await client.get(f"http://127.0.0.2:{server.server_port}/start")

            with pytest.raises(outbound.OutboundRefused):
                asyncio.run(follow())
            assert inside.requests == []
        finally:
            server.shutdown()
            server.server_close()


def test_a_connection_goes_to_the_address_that_was_checked(settings):
    """The name is resolved once, checked, and the connection made to that address (no second
    lookup an attacker's DNS could answer differently); the Host header keeps the name."""
    settings.HUB_OUTBOUND_ALLOW = ["127.0.0.0/8"]
    with FakeProvider() as server:
        port = server.openai_url.split(":")[2].split("/")[0]

        async def fetch():
            async with outbound.guarded_client() as client:
                return await client.get(f"http://localhost:{port}/v1/models")

        response = asyncio.run(fetch())
        assert response.status_code < 500
        assert response.request.url.host == "127.0.0.1"
        assert response.request.headers["host"] == f"localhost:{port}"
