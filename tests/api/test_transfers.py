"""Imports and exports over the REST API: start a job (an import uploads its file), follow its
progress and report, download an export; bad input named by field; another user's job is 404."""

import io
import zipfile
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chats.models import Chat, Transfer
from chats.services import create_chat, send_message
from chats.transfers import jobs
from tests.chats import export_samples as samples

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "media")}}}


def run(job: dict) -> None:
    """What the worker does with the queued job."""
    jobs.run_transfer(transfer_id=job["id"])


def start_import(api, data: bytes, name="conversations.json", **fields):
    return api.post("/api/v1/transfers/", {"kind": "import", "file": SimpleUploadedFile(name, data), **fields},
                    format="multipart")


def test_import_a_chatgpt_export_and_follow_it_to_its_report(api, user):
    conversations = samples.chatgpt_export(6)
    conversations[3]["mapping"] = "broken"
    started = start_import(api, samples.as_zip(conversations), name="chatgpt-export.zip")
    assert started.status_code == 201, started.content
    job = started.json()
    assert (job["kind"], job["status"], job["format"]) == ("import", "queued", "auto")
    assert job["name"] == "chatgpt-export.zip"
    run(job)
    shown = api.get(f"/api/v1/transfers/{job['id']}/").json()
    assert (shown["status"], shown["format"], shown["done"], shown["total"]) == ("done", "chatgpt", 6, 6)
    assert shown["report"]["imported"] == 5 and shown["report"]["skipped"] == 1
    assert shown["report"]["first_skip"].startswith('conversation 4 ("Conversation 4 about')
    assert shown["report"]["first_skip"].endswith("mapping is not an object")
    assert shown["download_url"] is None
    found = api.get("/api/v1/search/messages/", {"q": samples.marker(5)}).json()["results"]
    assert len(found) == 1 and found[0]["chat_title"].startswith("Conversation 5 ")
    assert api.get(f"/api/v1/transfers/{job['id']}/download/").status_code == 404  # an import has no file


def test_export_everything_download_it_and_import_it_back(api, api_for, user, make_user):
    for title in ("Garden", "Kitchen", "Garage"):
        send_message(chat=create_chat(owner=user, title=title), content=f"notes about the {title.lower()}")
    started = api.post("/api/v1/transfers/", {"kind": "export", "format": "hub"}, format="json")
    assert started.status_code == 201, started.content
    run(started.json())
    shown = api.get(f"/api/v1/transfers/{started.json()['id']}/").json()
    assert shown["status"] == "done" and shown["report"]["exported"] == 3
    download = api.get(shown["download_url"])
    assert download.status_code == 200 and download["Content-Disposition"].startswith("attachment")
    data = b"".join(download.streaming_content)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert len(archive.namelist()) == 3

    stranger = api_for(make_user("eve"))
    for path in (f"/api/v1/transfers/{shown['id']}/", shown["download_url"]):
        assert stranger.get(path).status_code == 404, path
    assert stranger.delete(f"/api/v1/transfers/{shown['id']}/").status_code == 404
    assert stranger.get("/api/v1/transfers/").json()["results"] == []

    back = start_import(stranger, data, name=shown["name"], format="hub").json()
    run(back)
    assert stranger.get(f"/api/v1/transfers/{back['id']}/").json()["report"]["imported"] == 3
    assert set(Chat.objects.exclude(owner=user).values_list("title", flat=True)) == {"Garden", "Kitchen", "Garage"}


def test_export_one_chat_as_markdown_and_a_folder_scope_of_another_user_is_404(api, api_for, user, make_user):
    chat = create_chat(owner=user, title="Bread")
    send_message(chat=chat, content="knead it well")
    job = api.post("/api/v1/transfers/", {"kind": "export", "format": "markdown", "chat_id": str(chat.pk)},
                   format="json").json()
    run(job)
    shown = api.get(f"/api/v1/transfers/{job['id']}/").json()
    assert shown["name"] == "bread.md" and shown["scope"] == {"chat": str(chat.pk)}
    text = b"".join(api.get(shown["download_url"]).streaming_content).decode()
    assert "knead it well" in text
    stranger = api_for(make_user("eve"))
    assert stranger.post("/api/v1/transfers/", {"kind": "export", "chat_id": str(chat.pk)},
                         format="json").status_code == 404


def test_bad_input_is_named_and_nothing_is_kept(api, settings):
    foreign = start_import(api, b"%PDF-1.7 a document", name="report.pdf")
    assert foreign.status_code == 400 and "file" in foreign.json()["error"]["fields"]
    wrong = start_import(api, b"[]", format="myspace")
    assert wrong.status_code == 400 and "format" in wrong.json()["error"]["fields"]
    missing = api.post("/api/v1/transfers/", {"kind": "import"}, format="multipart")
    assert missing.status_code == 400 and "file" in missing.json()["error"]["fields"]
    kind = api.post("/api/v1/transfers/", {"kind": "copy"}, format="json")
    assert kind.status_code == 400 and "kind" in kind.json()["error"]["fields"]
    nothing = api.post("/api/v1/transfers/", {"kind": "export"}, format="json")
    assert nothing.status_code == 400 and "scope" in nothing.json()["error"]["fields"]
    settings.HUB_MAX_IMPORT_MB = 0.01
    big = start_import(api, samples.as_json(samples.chatgpt_export(30)))
    assert big.status_code == 413 and big.json()["error"]["fields"] == {"file": ["at most 10 KB"]}
    assert not Transfer.objects.exists()


def test_an_import_may_be_larger_than_a_chat_file(api, settings):
    settings.HUB_MAX_UPLOAD_MB = 0.01
    started = start_import(api, samples.as_json(samples.chatgpt_export(30)))
    assert started.status_code == 201, started.content


def test_a_wrong_format_fails_the_job_naming_what_the_file_is(api):
    job = start_import(api, samples.as_json(samples.claude_export(2)), format="chatgpt").json()
    run(job)
    shown = api.get(f"/api/v1/transfers/{job['id']}/").json()
    assert shown["status"] == "failed" and shown["error"] == "This file is a Claude export, not a ChatGPT export."
    assert not Chat.objects.exists()


def test_the_list_pages_newest_first_in_few_queries(api, user, django_assert_max_num_queries):
    chat = create_chat(owner=user, title="One")
    made = [api.post("/api/v1/transfers/", {"kind": "export", "chat_id": str(chat.pk)}, format="json").json()
            for _ in range(3)]
    with django_assert_max_num_queries(4):
        first = api.get("/api/v1/transfers/", {"limit": 2}).json()
    assert [j["id"] for j in first["results"]] == [made[2]["id"], made[1]["id"]]
    rest = api.get("/api/v1/transfers/", {"limit": 2, "before": first["next_cursor"]}).json()
    assert [j["id"] for j in rest["results"]] == [made[0]["id"]] and rest["next_cursor"] is None
    run(made[0])
    assert api.delete(f"/api/v1/transfers/{made[0]['id']}/").status_code == 204
    busy = api.delete(f"/api/v1/transfers/{made[1]['id']}/")
    assert busy.status_code == 400 and "still running" in busy.json()["error"]["message"]


def test_the_openapi_schema_documents_transfers(api):
    schema = api.get("/api/v1/schema/").content.decode()
    for operation in ("transfers_list", "transfers_create", "transfers_retrieve", "transfers_download"):
        assert operation in schema


def test_export_a_folder_takes_its_chats_only_and_another_users_folder_is_404(api, api_for, user, make_user):
    from chats.services.organize import create_folder, move_chat

    folder = create_folder(owner=user, name="Work")
    for title in ("Budget", "Roadmap"):
        chat = create_chat(owner=user, title=title)
        send_message(chat=chat, content=f"{title.lower()} notes")
        move_chat(chat=chat, folder=folder)
    send_message(chat=create_chat(owner=user, title="Holiday"), content="beach")
    job = api.post("/api/v1/transfers/", {"kind": "export", "format": "markdown", "folder_id": folder.pk},
                   format="json").json()
    run(job)
    shown = api.get(f"/api/v1/transfers/{job['id']}/").json()
    assert shown["status"] == "done" and shown["scope"] == {"folder": folder.pk}
    data = b"".join(api.get(shown["download_url"]).streaming_content)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        texts = [archive.read(name).decode() for name in archive.namelist()]
    assert sorted(t.splitlines()[0] for t in texts) == ["# Budget", "# Roadmap"]
    stranger = api_for(make_user("eve"))
    refused = stranger.post("/api/v1/transfers/", {"kind": "export", "folder_id": folder.pk}, format="json")
    assert refused.status_code == 404


def test_an_exports_file_is_kept_for_its_days_then_deleted_and_the_job_says_so(api, user, settings):
    settings.HUB_EXPORT_KEEP_DAYS = 7
    send_message(chat=create_chat(owner=user, title="Garden"), content="notes about the garden")
    started = api.post("/api/v1/transfers/", {"kind": "export", "format": "hub"}, format="json").json()
    run(started)
    fresh = api.get(f"/api/v1/transfers/{started['id']}/").json()
    transfer = Transfer.objects.get(pk=started["id"])
    stored, storage = transfer.file.name, transfer.file.storage
    assert storage.exists(stored)
    finished = transfer.finished_at
    assert fresh["expires_at"] == (finished + timedelta(days=7)).isoformat()
    # An import's job and a newer export are not touched; six days on, nothing is deleted.
    newer = api.post("/api/v1/transfers/", {"kind": "export", "format": "markdown"}, format="json").json()
    run(newer)
    Transfer.objects.filter(pk=started["id"]).update(finished_at=finished - timedelta(days=6))
    assert jobs.purge_expired_exports() == 0
    assert api.get(fresh["download_url"]).status_code == 200

    Transfer.objects.filter(pk=started["id"]).update(finished_at=finished - timedelta(days=7, minutes=1))
    assert jobs.purge_expired_exports() == 1
    assert not storage.exists(stored)
    expired = api.get(f"/api/v1/transfers/{started['id']}/").json()
    assert expired["status"] == "done" and expired["download_url"] is None and expired["expires_at"] is None
    assert expired["report"]["exported"] == 1 and expired["report"]["expired_at"]
    assert api.get(fresh["download_url"]).status_code == 404
    assert api.get(f"/api/v1/transfers/{newer['id']}/").json()["download_url"] is not None
    assert jobs.purge_expired_exports() == 0  # the next hour finds nothing more


def test_expired_exports_are_purged_every_hour_by_beat(settings):
    from chats import tasks  # noqa: F401 (registers the app's tasks, as a worker's start does)
    from hub.celery import app

    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["chats.purge_expired_exports"] == 3600.0
    assert app.tasks["chats.purge_expired_exports"].run() == 0  # a worker finds it by that name
