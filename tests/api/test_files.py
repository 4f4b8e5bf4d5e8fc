"""Files over the REST API: upload (multipart), list, read, download, send with a message, delete;
the limits and another user's file."""

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chats.models import Attachment

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "media")}}}


def test_upload_list_send_download_and_delete_over_the_api(api, chat):
    answer = api.post(f"/api/v1/chats/{chat.pk}/files/", {"file": [
        SimpleUploadedFile("plan.md", b"# Plan\n\nPets are allowed."),
        SimpleUploadedFile("scratch.txt", b"scratch")]}, format="multipart")
    assert answer.status_code == 201, answer.content
    plan, scratch = answer.json()["results"]
    assert (plan["name"], plan["content_type"], plan["size"]) == ("plan.md", "text/markdown", 25)
    assert plan["message_id"] is None
    assert answer.json()["storage"]["used"] == 32

    sent = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "see the plan", "files": [plan["id"]]},
                    format="json")
    assert sent.status_code == 201, sent.content
    message = sent.json()["message"]
    assert [f["id"] for f in message["data"]["files"]] == [plan["id"]]
    listed = api.get(f"/api/v1/chats/{chat.pk}/files/").json()["results"]
    assert [(f["name"], f["message_id"]) for f in listed] == [("plan.md", message["id"]), ("scratch.txt", None)]
    assert api.get(f"/api/v1/files/{plan['id']}/").json()["message_id"] == message["id"]

    content = api.get(f"/api/v1/files/{plan['id']}/content/")
    assert content.status_code == 200 and b"".join(content.streaming_content) == b"# Plan\n\nPets are allowed."
    assert content["Content-Disposition"].startswith("attachment") and content["X-Content-Type-Options"] == "nosniff"

    assert api.delete(f"/api/v1/files/{scratch['id']}/").status_code == 204
    refused = api.delete(f"/api/v1/files/{plan['id']}/")
    assert refused.status_code == 400 and "stays with it" in refused.json()["error"]["message"]
    assert list(Attachment.objects.values_list("name", flat=True)) == ["plan.md"]


def test_the_api_refuses_too_large_files_unknown_ids_and_another_users_files(api, api_for, chat, make_user, settings):
    settings.HUB_MAX_UPLOAD_MB = 0.01
    big = api.post(f"/api/v1/chats/{chat.pk}/files/", {"file": [SimpleUploadedFile("big.bin", b"\1" * 20_000)]},
                   format="multipart")
    assert big.status_code == 413 and big.json()["error"]["fields"] == {"file": ["at most 10 KB"]}
    empty = api.post(f"/api/v1/chats/{chat.pk}/files/", {}, format="multipart")
    assert empty.status_code == 400 and "file" in empty.json()["error"]["fields"]
    unknown = api.post(f"/api/v1/chats/{chat.pk}/messages/", {"content": "x", "files": ["nope"]}, format="json")
    assert unknown.status_code == 400 and "files" in unknown.json()["error"]["fields"]

    mine = api.post(f"/api/v1/chats/{chat.pk}/files/", {"file": [SimpleUploadedFile("a.txt", b"a")]},
                    format="multipart").json()["results"][0]
    stranger = api_for(make_user("eve"))
    for path in (f"/api/v1/files/{mine['id']}/", f"/api/v1/files/{mine['id']}/content/",
                 f"/api/v1/chats/{chat.pk}/files/"):
        assert stranger.get(path).status_code == 404, path
    assert stranger.delete(f"/api/v1/files/{mine['id']}/").status_code == 404
    assert Attachment.objects.count() == 1


def test_the_openapi_schema_documents_files(api):
    schema = api.get("/api/v1/schema/").content.decode()
    for operation in ("files_create", "files_list", "files_retrieve", "files_content", "files_destroy"):
        assert operation in schema
    assert "multipart/form-data" in schema


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_reads_an_uploaded_pdf_into_search(live_hub, http, user, token_for):
    """Over real HTTP to the running hub: the upload's commit sends the reading task, its worker
    reads the PDF in a child process, and the passages are found by search."""
    from chats.services import create_chat
    from tests.chats.test_reading import pdf_with_pages

    chat = create_chat(owner=user, title="Lease")
    headers = {"Authorization": f"Bearer {token_for(user)}"}
    pages = ["The flat has two rooms."] * 3 + ["Tenants may keep small pets with consent."]
    answer = http.post(f"/api/v1/chats/{chat.pk}/files/", headers=headers,
                       files={"file": ("lease.pdf", pdf_with_pages(pages), "application/pdf")})
    assert answer.status_code == 201, answer.text
    file_id = answer.json()["results"][0]["id"]
    deadline = time.monotonic() + 30
    while (shown := http.get(f"/api/v1/files/{file_id}/", headers=headers).json())["text_status"] != "read":
        assert shown["text_status"] in ("pending", "reading") and time.monotonic() < deadline, shown
        time.sleep(0.2)
    assert shown["pages"] == 4
    found = http.get("/api/v1/search/documents/?q=pets&label=files", headers=headers).json()
    assert found["results"] and found["results"][0]["key"].startswith(f"{file_id}#")
