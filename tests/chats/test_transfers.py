"""Imports and exports as jobs, through the services: ChatGPT's and Claude's exports (with
branches), Hub JSON both ways, bad entries skipped with their reason, foreign and malformed files
refused with nothing stored, progress and search."""

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chats import events, search
from chats.models import Chat, Message, Transfer
from chats.services import create_chat, send_message, upload_file
from chats.services import export_chat as services_export
from chats.transfers import jobs
from hub.errors import InvalidInput, TooLarge
from tests.chats import export_samples as samples

pytestmark = pytest.mark.django_db


def upload(data: bytes, name="conversations.json"):
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def imported(user, data: bytes, *, format="auto", name="conversations.json") -> Transfer:
    transfer = jobs.start_import(owner=user, upload=upload(data, name), format=format)
    jobs.run_transfer(transfer_id=str(transfer.pk))
    transfer.refresh_from_db()
    return transfer


def test_chatgpt_export_keeps_the_current_branch_and_regenerated_answers_as_versions(user):
    entry = samples.chatgpt_conversation(
        "Trip plan", [("Where should we go?", "Lisbon."), ("And eat?", "Pasteis de nata."), ("When?", "In May.")],
        regenerated={1: ["Bacalhau.", "Sardines."]}, edited={2: ("How long?", "A week.")}, seed=7)
    transfer = imported(user, samples.as_zip([entry]))
    assert transfer.status == "done", transfer.error
    assert transfer.format == "chatgpt" and (transfer.done, transfer.total) == (1, 1)
    chat = Chat.objects.get(pk=transfer.report["chats"][0]["id"])
    assert chat.title == "Trip plan"
    assert chat.created_at.timestamp() == pytest.approx(entry["create_time"], abs=0.01)
    messages = list(chat.messages.order_by("id"))
    assert [m.content for m in messages] == [
        "Where should we go?", "Lisbon.", "And eat?", "Pasteis de nata.", "When?", "In May."]
    # The hidden system node and the edited question's branch are left out.
    assert "How long?" not in [m.content for m in messages]
    reply = messages[3]
    assert reply.sender_agent.name == "ChatGPT" and reply.sender_user is None
    assert [v["content"] for v in reply.data["versions"]] == ["Bacalhau.", "Sardines."]
    assert reply.data["model"] == "gpt-4o"
    assert messages[0].sender_user == user and messages[0].sender_agent is None
    # The agent is the user's own and is no member of the imported chat: it does not answer there.
    assert reply.sender_agent.owner == user and not chat.memberships.exists()


def test_chatgpt_content_other_than_text_is_kept_as_text_or_left_out(user):
    entry = samples.chatgpt_conversation("Mixed", [("Look at this", "A cat."), ("Run it", "Done: 4.")], seed=11)
    nodes = {n["message"]["content"]["parts"][0]: n for n in entry["mapping"].values()
             if n["message"] and n["message"]["content"].get("parts")}
    nodes["Look at this"]["message"]["content"] = {"content_type": "multimodal_text", "parts": [
        {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"}, "Look at this"]}
    nodes["Run it"]["message"]["content"] = {"content_type": "multimodal_text", "parts": [
        {"content_type": "audio_transcription", "text": "Run it please"}]}
    thinking = nodes["Done: 4."]["message"]
    nodes["Done: 4."]["message"] = {**thinking, "content": {"content_type": "code", "language": "python",
                                                             "text": "print(2 + 2)"}}
    transfer = imported(user, samples.as_json([entry]))
    chat = Chat.objects.get(pk=transfer.report["chats"][0]["id"])
    assert list(chat.messages.order_by("id").values_list("content", flat=True)) == [
        "[image]\n\nLook at this", "A cat.", "Run it please", "```python\nprint(2 + 2)\n```"]


def test_a_second_import_from_chatgpt_uses_the_same_agent(user):
    imported(user, samples.as_json(samples.chatgpt_export(2)))
    imported(user, samples.as_json(samples.chatgpt_export(1, seed=9)))
    senders = set(Message.objects.filter(chat__owner=user, sender_agent__isnull=False,
                                         data__imported_from="chatgpt").values_list("sender_agent", flat=True))
    assert len(senders) == 1


def test_imported_chats_are_searchable_at_once(user):
    transfer = imported(user, samples.as_json(samples.chatgpt_export(5)))
    assert transfer.report["imported"] == 5
    for n in range(1, 6):
        hits = search.search_messages(owner=user, query=samples.marker(n))
        assert len(hits) == 1, n
        assert hits[0].chat_title.startswith(f"Conversation {n} ")


def test_claude_export_is_imported_with_its_times_and_attachment_names(user):
    entry = samples.claude_conversation("Bread", [("How do I bake bread?", "Flour, water, salt, time.")], seed=3,
                                        attachments=[{"file_name": "recipe.txt", "extracted_content": "flour"}])
    transfer = imported(user, samples.as_zip([entry], product="claude"), name="data-2025.zip")
    assert transfer.status == "done" and transfer.format == "claude"
    chat = Chat.objects.get(title="Bread", owner=user)
    question, answer = chat.messages.order_by("id")
    assert question.content.startswith("How do I bake bread?") and "recipe.txt" in question.content
    assert answer.sender_agent.name == "Claude" and answer.content == "Flour, water, salt, time."
    assert answer.created_at.isoformat().startswith(entry["chat_messages"][1]["created_at"][:19])


def test_a_bad_entry_is_skipped_with_its_reason_and_the_rest_import(user):
    conversations = samples.chatgpt_export(20)
    conversations[16]["title"] = "Trip plan"
    conversations[16]["mapping"] = ["not", "a", "map"]
    conversations[18] = "just text"
    transfer = imported(user, samples.as_json(conversations))
    assert transfer.status == "done"
    assert transfer.report["imported"] == 18 and transfer.report["skipped"] == 2
    assert transfer.report["first_skip"] == 'conversation 17 ("Trip plan"): mapping is not an object'
    assert transfer.report["skips"][1]["entry"] == 19
    assert not Chat.objects.filter(owner=user, title="Trip plan").exists()


def test_a_broken_first_entry_and_an_empty_conversation_are_skipped(user):
    conversations = samples.chatgpt_export(4)
    conversations[0] = {"title": "Broken", "mapping": None}
    conversations[2]["mapping"] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    conversations[2]["current_node"] = "root"
    transfer = imported(user, samples.as_json(conversations))
    assert transfer.status == "done" and transfer.format == "chatgpt"
    assert [(s["entry"], s["reason"]) for s in transfer.report["skips"]] == [
        (1, "mapping is not an object"), (3, "holds no messages")]
    assert transfer.report["imported"] == 2


def test_malformed_json_fails_the_job_and_stores_nothing(user):
    data = samples.as_json(samples.chatgpt_export(5))
    transfer = imported(user, data[: len(data) - 40])  # cut off in the last conversation
    assert transfer.status == "failed"
    assert "not valid JSON" in transfer.error and "nothing was imported" in transfer.error
    assert not Chat.objects.filter(owner=user).exclude(title="ChatGPT").exists()
    assert not transfer.file  # the upload is removed


def test_a_json_file_that_is_no_export_fails_with_a_clear_error(user):
    transfer = imported(user, json.dumps([{"name": "a shopping list"}]).encode())
    assert transfer.status == "failed" and "not a Hub, ChatGPT or Claude export" in transfer.error
    assert not Chat.objects.filter(owner=user).exists()


def test_one_hub_chat_that_cannot_be_imported_fails_naming_the_field(user):
    chat = create_chat(owner=user, title="Kept")
    send_message(chat=chat, content="hello")
    data = services_export(chat)
    data["messages"][0]["content"] = ["not", "text"]
    transfer = imported(user, json.dumps(data).encode(), name="kept.json")
    assert transfer.status == "failed" and "messages[0].content" in transfer.error
    assert Chat.objects.filter(owner=user).count() == 1  # the original alone
    object_no_export = imported(user, json.dumps({"title": "a note", "format": "mine"}).encode())
    assert object_no_export.status == "failed" and "not a Hub, ChatGPT or Claude export" in object_no_export.error


def test_a_large_export_is_read_in_bounded_memory():
    """The file is streamed: reading 2,000 conversations (about 20 MB) holds one at a time."""
    import tracemalloc

    from chats.transfers import sources

    data = samples.as_json(samples.chatgpt_export(100, turns=5) * 20)
    assert len(data) > 15 * 2**20
    stored = io.BytesIO(data)
    tracemalloc.start()
    try:
        with sources.json_streams(stored) as documents:
            assert sources.sniff_format(documents[0]) == "chatgpt"
            assert sources.count_conversations(documents[0]) == 2000
            read = sum(1 for _ in sources.conversations(documents[0]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == 2000
    assert peak < 2 * 2**20, f"peak {peak / 2**20:.1f} MB"


def test_the_wrong_format_chosen_names_what_the_file_is(user):
    transfer = imported(user, samples.as_json(samples.claude_export(2)), format="chatgpt")
    assert transfer.status == "failed" and transfer.error == "This file is a Claude export, not a ChatGPT export."
    assert not Chat.objects.filter(owner=user).exists()


def test_a_foreign_file_is_refused_at_upload(user):
    with pytest.raises(InvalidInput) as refused:
        jobs.start_import(owner=user, upload=upload(b"\x89PNG\r\n\x1a\nrest", "photo.png"))
    assert "file" in refused.value.fields
    with pytest.raises(InvalidInput) as refused:
        jobs.start_import(owner=user, upload=upload(b"[]"), format="myspace")
    assert "format" in refused.value.fields
    assert not Transfer.objects.exists()


def test_an_oversized_file_is_refused(user, settings):
    settings.HUB_MAX_IMPORT_MB = 0.001
    with pytest.raises(TooLarge):
        jobs.start_import(owner=user, upload=upload(samples.as_json(samples.chatgpt_export(3))))
    assert not Transfer.objects.exists()


def test_a_zip_without_conversations_is_refused(user):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    transfer = imported(user, buffer.getvalue(), name="notes.zip")
    assert transfer.status == "failed" and "without conversations.json" in transfer.error


def test_hub_export_of_everything_imports_back_equal(user, other_user):
    first = create_chat(owner=user, title="First")
    send_message(chat=first, content="hello from the first chat")
    second = create_chat(owner=user, title="Second")
    send_message(chat=second, content="a word in the second")
    plan = upload_file(chat=second, upload=SimpleUploadedFile("plan.txt", b"the garden plan"))
    send_message(chat=second, content="the plan, attached", files=[str(plan.pk)])
    export = jobs.start_export(owner=user, format="hub")
    assert jobs.run_transfer(transfer_id=str(export.pk)) == "done"
    export.refresh_from_db()
    assert (export.done, export.total) == (2, 2) and export.name.endswith(".zip")
    payload = events.transfer_payload(export)
    assert payload["download_url"].endswith(f"/transfers/{export.pk}/download/")
    with export.file.open("rb") as stored:
        data = stored.read()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert len(archive.namelist()) == 2
    back = imported(other_user, data, name=export.name, format="hub")
    assert back.status == "done" and back.report["imported"] == 2
    titles = set(Chat.objects.filter(owner=other_user).values_list("title", flat=True))
    assert titles == {"First", "Second"}
    assert Message.objects.filter(chat__owner=other_user, content="a word in the second").exists()
    copy = Message.objects.get(chat__owner=other_user, content="the plan, attached")
    assert [f["name"] for f in copy.data["files"]] == ["plan.txt"]
    with copy.files.get().file.open("rb") as stored:
        assert stored.read() == b"the garden plan"  # the file's bytes came along


def test_one_chat_exports_as_markdown(user):
    chat = create_chat(owner=user, title="Notes on bread")
    send_message(chat=chat, content="knead for ten minutes")
    export = jobs.start_export(owner=user, format="markdown", chat=chat)
    jobs.run_transfer(transfer_id=str(export.pk))
    export.refresh_from_db()
    assert export.name == "notes-on-bread.md"
    with export.file.open("rb") as stored:
        text = stored.read().decode()
    assert text.startswith("# Notes on bread") and "knead for ten minutes" in text


def test_an_export_with_nothing_in_scope_is_refused(user):
    with pytest.raises(InvalidInput) as refused:
        jobs.start_export(owner=user, format="hub")
    assert "scope" in refused.value.fields
    with pytest.raises(InvalidInput) as refused:
        jobs.start_export(owner=user, format="pdf")
    assert "format" in refused.value.fields


def test_a_second_delivery_goes_on_where_the_first_stopped(user):
    transfer = jobs.start_import(owner=user, upload=upload(samples.as_json(samples.chatgpt_export(4))))
    # A worker imported two conversations and died: its row says running, done 2.
    Transfer.objects.filter(pk=transfer.pk).update(status="running", done=2, report={"imported": 2})
    assert jobs.run_transfer(transfer_id=str(transfer.pk)) == "done"
    titles = sorted(Chat.objects.filter(owner=user).exclude(title="ChatGPT").values_list("title", flat=True))
    assert [t.split(" about")[0] for t in titles] == ["Conversation 3", "Conversation 4"]
    transfer.refresh_from_db()
    assert transfer.report["imported"] == 4 and transfer.done == 4
    assert jobs.run_transfer(transfer_id=str(transfer.pk)) == "done"  # a finished job is left alone
    assert Chat.objects.filter(owner=user).count() == 3


def test_progress_is_told_to_the_owners_tabs(user):
    sent = []
    original = events.broadcast_now
    events.broadcast_now = lambda group, event: sent.append((group, event))
    try:
        imported(user, samples.as_json(samples.chatgpt_export(3)))
    finally:
        events.broadcast_now = original
    updates = [e["transfer"] for g, e in sent if e["type"] == events.TRANSFER_UPDATED]
    assert all(g == events.user_group(user.pk) for g, e in sent if e["type"] == events.TRANSFER_UPDATED)
    assert updates[-1]["status"] == "done" and updates[-1]["done"] == 3 and updates[-1]["total"] == 3
    assert json.loads(json.dumps(updates[-1])) == updates[-1]
