"""Remotes: a real MCP server on loopback, attached to a thread, offered to the agent as tools."""

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agents_app import remotes
from agents_app.models import Run
from chats import services
from chats.models import Message
from chats.selectors import thread_history
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "remote-secret-token-4242"


@pytest.fixture(scope="module")
def mcp_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = Path(__file__).with_name("mcp_server.py")
    process = subprocess.Popen([sys.executable, str(server), str(port), SECRET],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    process.kill()
    process.wait(10)


def test_an_attached_remote_is_a_tool_and_its_secret_stays_secret(scripted_agent, user, run_now, mcp_url):
    agent = scripted_agent(reply="Checked for {prompt}.", tools=[("weather", {"city": "Paris"})])
    assert agent.tools == []  # the remote brings the tool, not the agent's own list
    chat = agent.main_chat
    remote = remotes.create_remote(owner=user, name="Weather", url=mcp_url, headers={"x-remote-token": SECRET})
    resource = remotes.attach_remote(chat=chat, remote=remote)
    assert resource.kind == "resource" and not Run.objects.exists()  # resources reach no agent
    services.send_message(chat=chat, content="Paris")
    assert run_now() == ["succeeded"]
    step = Message.objects.get(kind="log", subkind="tool")
    assert step.data["name"] == "weather" and step.data["result"] == "Sunny in Paris, 21°C"
    assert Message.objects.get(sender_agent=agent, kind="message").content == "Checked for Paris."
    for message in Message.objects.all():
        assert SECRET not in message.content and SECRET not in str(message.data)


def test_a_thread_without_the_remote_does_not_get_its_tools(user, mcp_url):
    chat = services.create_chat(owner=user, title="Plain")
    remote = remotes.create_remote(owner=user, name="Weather", url=mcp_url)
    remotes.attach_remote(chat=chat, remote=remote, thread=None)
    other = services.send_message(chat=chat, content="elsewhere", new_thread_title="Other").thread
    assert remotes.remotes_for_thread(chat=chat, messages=thread_history(chat=chat, thread_id=None)) == [remote]
    assert remotes.remotes_for_thread(chat=chat, messages=thread_history(chat=chat, thread_id=other.pk)) == []


def test_another_users_remote_cannot_be_attached(user, other_user):
    chat = services.create_chat(owner=user, title="Mine")
    theirs = remotes.create_remote(owner=other_user, name="Theirs", url="http://127.0.0.1:9/mcp")
    from hub.errors import NotFound

    with pytest.raises(NotFound):
        remotes.attach_remote(chat=chat, remote=theirs)
    with pytest.raises(NotFound):
        remotes.remote_for_user(user=user, remote_id=theirs.pk)


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "", "url": "http://x/mcp"}, "name"),
    ({"name": "n", "url": "ftp://x/mcp"}, "url"),
    ({"name": "n", "url": "http://x/mcp", "headers": {"a": 1}}, "headers"),
])
def test_bad_remotes_name_the_field(user, kwargs, field):
    with pytest.raises(InvalidInput) as err:
        remotes.create_remote(owner=user, **kwargs)
    assert field in err.value.fields


def test_remote_pages_never_show_the_header_and_attach_answers_json(client, user, other_user):
    client.force_login(user)
    response = client.post("/agents/remotes/", {"name": "Docs", "url": "http://127.0.0.1:9/mcp",
                                                "header_name": "Authorization", "header_value": "Bearer " + SECRET})
    assert response.status_code == 302
    page = client.get("/agents/remotes/")
    assert b"Docs" in page.content and SECRET.encode() not in page.content
    remote = user.remotes.get()
    assert remotes.headers_of(remote) == {"Authorization": "Bearer " + SECRET}
    assert SECRET not in remote.encrypted_headers  # encrypted at rest
    chat = services.create_chat(owner=user, title="Attach here")
    attached = client.post(f"/agents/remotes/{remote.pk}/attach/", {"chat_id": str(chat.pk)})
    assert attached.status_code == 201 and attached.json()["message"]["kind"] == "resource"
    assert SECRET not in attached.content.decode()
    assert client.get("/agents/remotes/choices/").json() == {"remotes": [{"id": remote.pk, "name": "Docs"}]}
    client.force_login(other_user)
    assert client.post(f"/agents/remotes/{remote.pk}/attach/", {"chat_id": str(chat.pk)}).status_code == 404
    assert client.post(f"/agents/remotes/{remote.pk}/delete/").status_code == 404
