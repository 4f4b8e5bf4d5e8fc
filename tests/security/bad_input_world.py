"""The world the bad-input tests probe: a user with one of everything, and a snapshot of what they store."""

import pytest

from agents_app.models import Agent, ProviderKey, Remote, Run
from chats.models import (
    Attachment,
    Chat,
    ContextBlock,
    Membership,
    MemoryEntry,
    Message,
    SharedDocument,
    ShareLink,
    Thread,
)
from hub.models import ApiToken, Invitation


def stored_rows(owner) -> dict:
    """Every row the owner has, as plain values (a token's last use is not theirs to change)."""
    sets = {
        "chats": Chat.objects.filter(owner=owner), "threads": Thread.objects.filter(chat__owner=owner),
        "messages": Message.objects.filter(chat__owner=owner),
        "members": Membership.objects.filter(chat__owner=owner), "agents": Agent.objects.filter(owner=owner),
        "runs": Run.objects.filter(chat__owner=owner),
        "blocks": ContextBlock.objects.filter(owner=owner), "entries": MemoryEntry.objects.filter(block__owner=owner),
        "documents": SharedDocument.objects.filter(owner=owner), "remotes": Remote.objects.filter(owner=owner),
        "keys": ProviderKey.objects.filter(owner=owner), "files": Attachment.objects.filter(owner=owner),
        "tokens": ApiToken.objects.filter(user=owner), "invitations": Invitation.objects.filter(created_by=owner),
        "shares": ShareLink.objects.filter(chat__owner=owner),
    }
    rows = {name: list(query.order_by("pk").values()) for name, query in sets.items()}
    for token in rows["tokens"]:
        token.pop("last_used_at")
    return rows


@pytest.fixture(name="world")
def world_fixture(make_user, make_agent):
    """A user with a chat (an agent in it, a thread, a message, its queued run), a memory block, a
    shared document, a remote, a provider key and an API token; and their ids, to put in paths."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from agents_app import remotes, secrets
    from chats import memory, search
    from chats.services import create_chat, send_message, share_chat, upload_file
    from hub.services import create_api_token

    user = make_user("prober")
    agent = make_agent(user, name="Probe agent", settings={"script": {"reply": "ok"}})
    chat = create_chat(owner=user, title="Probes", agents=[agent])
    message = send_message(chat=chat, content="hello probes", new_thread_title="Probe thread")
    block = memory.append(owner=user, label="probe", text="remember this")
    document = search.index_shared(owner=user, label="kb", key="k", content="probe doc")
    remote = remotes.create_remote(owner=user, name="Tools", url="http://127.0.0.1:9/mcp")
    secrets.store_key(owner=user, provider="openai", key="sk-probe-key-1234")
    token, raw_token = create_api_token(user=user, name="probes")
    unsent = upload_file(chat=chat, upload=SimpleUploadedFile("probe.txt", b"probe file"))
    link = share_chat(chat=chat)
    from chats.services import create_folder, organize_chat

    folder = create_folder(owner=user, name="Probe folder", instructions="probe")
    organize_chat(chat=chat, folder=folder, tags=["probe"])
    return {
        "user": user, "token": raw_token, "chat": chat, "agent": agent, "message": message,
        "ids": {"chat_id": str(chat.pk), "message_id": message.pk, "thread_id": message.thread_id,
                "agent_id": agent.pk, "run_id": str(Run.objects.get(trigger_message=message).pk),
                "entry_id": block.entries.first().pk, "document_id": document.pk, "label": "probe",
                "remote_id": remote.pk, "provider": "openai", "token_id": token.pk,
                "file_id": str(unsent.pk), "share_id": link.pk, "token": link.token,
                "folder_id": folder.pk},
    }


@pytest.fixture(autouse=True, scope="module")
def socket_frame_thread_disconnected(django_db_setup):
    """The sockets' frame threads keep their database connections open after the tests, which would
    keep the test database from being dropped at the end."""
    yield
    from django.db import connections

    from chats.consumers import FRAME_THREADS

    FRAME_THREADS.run_on_each(connections.close_all)


@pytest.fixture
def fresh_channel_layer():
    """A channel layer of the test's own: channels-redis binds its state to the event loop."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
