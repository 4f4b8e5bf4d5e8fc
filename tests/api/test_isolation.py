"""Another user's objects: every endpoint answers 404 for their ids, and changes nothing of theirs.

The endpoints are read from the OpenAPI schema itself, so a new endpoint is covered (or this test
fails until it is).
"""

import pytest
from drf_spectacular.generators import SchemaGenerator

from agents_app.models import Agent, ProviderKey, Remote, Run
from chats.models import (
    Attachment,
    Chat,
    ContextBlock,
    Folder,
    Membership,
    MemoryEntry,
    Message,
    SharedDocument,
    ShareLink,
    Tag,
    Thread,
    Transfer,
)

pytestmark = pytest.mark.django_db

# Operations whose path is a namespace of the caller: as B they act on B's own block, never A's.
OWN_NAMESPACE_WRITES = {"memory_set", "memory_append", "provider_keys_set", "provider_keys_destroy"}


def snapshot(owner) -> dict:
    """Every row of owner's, as plain values."""
    sets = {
        "chats": Chat.objects.filter(owner=owner), "threads": Thread.objects.filter(chat__owner=owner),
        "messages": Message.objects.filter(chat__owner=owner),
        "members": Membership.objects.filter(chat__owner=owner), "agents": Agent.objects.filter(owner=owner),
        "runs": Run.objects.filter(chat__owner=owner).defer("history"),
        "blocks": ContextBlock.objects.filter(owner=owner), "entries": MemoryEntry.objects.filter(block__owner=owner),
        "documents": SharedDocument.objects.filter(owner=owner), "remotes": Remote.objects.filter(owner=owner),
        "keys": ProviderKey.objects.filter(owner=owner), "files": Attachment.objects.filter(owner=owner),
        "folders": Folder.objects.filter(owner=owner), "tags": Tag.objects.filter(owner=owner),
        "shares": ShareLink.objects.filter(chat__owner=owner),
        "transfers": Transfer.objects.filter(owner=owner),
    }
    return {name: sorted(map(repr, rows.order_by("pk").values())) for name, rows in sets.items()}


@pytest.fixture
def victim(make_user, scripted, run_now_inline):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from chats import memory, search
    from chats.services import create_chat, send_message, upload_file

    alice = make_user("victim")
    agent = scripted(alice, name="Alice's agent")
    chat = create_chat(owner=alice, title="Private", agents=[agent])
    message = send_message(chat=chat, content="secret plans", new_thread_title="Secret thread")
    run_now_inline()
    block = memory.append(owner=alice, label="private", text="my secret")
    document = search.index_shared(owner=alice, label="kb", key="k", content="secret doc")
    from agents_app import remotes, secrets

    remote = remotes.create_remote(owner=alice, name="Tools", url="http://127.0.0.1:9/mcp",
                                   headers={"Authorization": "Bearer secret"})
    secrets.store_key(owner=alice, provider="openai", key="sk-alice-secret-key")
    unsent = upload_file(chat=chat, upload=SimpleUploadedFile("secret.txt", b"secret file"))
    from chats.services import create_folder, organize_chat

    folder = create_folder(owner=alice, name="Secret folder", instructions="secret instructions")
    organize_chat(chat=chat, folder=folder, tags=["secret"], pinned=True)
    from chats.services import share_chat

    link = share_chat(chat=chat, include_notes=True, include_memory=True)
    from chats.transfers import jobs

    export = jobs.start_export(owner=alice, format="hub", chat=chat)
    jobs.run_transfer(transfer_id=str(export.pk))
    return {
        "user": alice, "chat_id": str(chat.pk), "message_id": message.pk, "thread_id": message.thread_id,
        "agent_id": agent.pk, "run_id": str(Run.objects.get(trigger_message=message).pk),
        "entry_id": block.entries.first().pk, "document_id": document.pk, "label": "private",
        "remote_id": remote.pk, "provider": "openai", "file_id": str(unsent.pk), "folder_id": folder.pk,
        "share_id": link.pk, "transfer_id": str(export.pk),
    }


@pytest.fixture
def run_now_inline():
    from agents_app.turns.execution import execute_run

    def run():
        for queued in Run.objects.filter(status=Run.Status.QUEUED).order_by("created_at"):
            execute_run(queued.pk)

    return run


BODIES = {
    "chats_update": {"title": "hijacked", "archived": True}, "folders_update": {"name": "hijacked"},
    "chats_fork": {"message_id": None}, "members_create": {"agent_id": None},
    "messages_create": {"content": "hijacked"}, "messages_update": {"content": "hijacked"},
    "memory_set": {"content": "hijacked"}, "memory_append": {"text": "hijacked"},
    "remotes_attach": {"chat_id": None}, "provider_keys_set": {"key": "sk-hijacked-key"},
}


def operations():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            params = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            yield path, method, operation["operationId"], params


def test_every_endpoint_answers_404_for_another_users_ids_and_changes_nothing(victim, make_user, api_for):
    from chats.services import create_chat

    mallory = make_user("mallory")
    api = api_for(mallory)
    own_chat = create_chat(owner=mallory, title="Mallory's")
    before = snapshot(victim["user"])
    checked = set()
    for path, method, operation_id, params in operations():
        if not params:
            continue
        body = dict(BODIES.get(operation_id, {}))
        for key in body:
            if body[key] is None:
                body[key] = victim[key]
        # All of A's ids; and, for ids inside a chat, Mallory's own chat with A's inner ids.
        variants = [dict(victim)]
        if "chat_id" in params and len(params) > 1:
            variants.append({**victim, "chat_id": str(own_chat.pk)})
        for values in variants:
            url = path.format(**{name: values[name] for name in params})
            response = getattr(api, method)(url, body, format="json") if body else getattr(api, method)(url)
            if operation_id in OWN_NAMESPACE_WRITES:
                assert response.status_code in (200, 204), (operation_id, url)  # Mallory's own block or key
                continue
            assert response.status_code == 404, (operation_id, url, response.status_code, response.content[:200])
            assert response.json()["error"]["code"] == "not_found"
        checked.add(operation_id)
    assert before == snapshot(victim["user"])
    assert checked == {op for _, _, op, params in operations() if params} and len(checked) >= 25


def test_lists_and_searches_show_nothing_of_another_user(victim, make_user, api_for):
    api = api_for(make_user("mallory"))
    assert api.get("/api/v1/chats/").json()["results"] == []
    assert api.get("/api/v1/chats/?trash=true").json()["results"] == []
    assert "Alice's agent" not in [a["name"] for a in api.get("/api/v1/agents/").json()["results"]]
    assert api.get("/api/v1/memory/").json()["results"] == []
    assert api.get("/api/v1/documents/").json()["results"] == []
    assert api.get("/api/v1/remotes/").json()["results"] == []
    assert api.get("/api/v1/provider-keys/").json()["results"] == []
    assert api.get("/api/v1/shares/").json()["results"] == []
    for kind, extra in (("messages", {}), ("chats", {}), ("documents", {"label": "kb"})):
        found = api.get(f"/api/v1/search/{kind}/", {"q": "secret private", **extra})
        assert found.status_code == 200 and found.json()["results"] == [], kind
    forged = api.post("/api/v1/chats/", {"title": "x", "agent_ids": [victim["agent_id"]]}, format="json")
    assert forged.status_code == 400 and "agent_ids" in forged.json()["error"]["fields"]
