"""Files in chats as a user meets them: upload, send with a message, download safely, limits,
names, another user's file, and the bytes going with their chat."""

import io
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from chats import services
from chats.models import Attachment, Message

pytestmark = pytest.mark.django_db

PDF_HEAD = b"%PDF-1.4\n% a tiny document\n"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    """Files of each test in a folder of its own, to look at on disk."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "media")}}}
    return tmp_path / "media"


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def upload(client, chat, *named_files):
    return client.post(f"/chats/{chat.pk}/files/",
                       {"file": [SimpleUploadedFile(name, data) for name, data in named_files]})


def stored_files(media: Path) -> list[Path]:
    return [p for p in media.rglob("*") if p.is_file()] if media.exists() else []


def test_uploads_are_typed_by_their_bytes_and_downloads_never_run_in_the_browser(client, user, chat, media):
    client.force_login(user)
    answer = upload(client, chat, ("report.pdf", PDF_HEAD + b"x" * 100), ("dot.png", png_bytes()),
                    ("innocent.png", b"<html><script>alert(1)</script></html>"),
                    ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'))
    assert answer.status_code == 201, answer.content
    shown = {f["name"]: f for f in answer.json()["files"]}
    assert {n: f["content_type"] for n, f in shown.items()} == {"report.pdf": "application/pdf", "dot.png": "image/png",
                                                               "innocent.png": "text/html", "logo.svg": "image/svg+xml"}
    assert [n for n, f in shown.items() if f["image"]] == ["dot.png"]
    assert answer.json()["storage"]["used"] == sum(f["size"] for f in shown.values())
    assert len(stored_files(media)) == 4

    image = client.get(shown["dot.png"]["url"])
    assert image["Content-Type"] == "image/png" and b"".join(image.streaming_content) == png_bytes()
    assert "attachment" not in image.get("Content-Disposition", "")
    for name in ("innocent.png", "logo.svg"):
        page = client.get(shown[name]["url"])
        assert page["Content-Type"] == "application/octet-stream", name
        assert page["Content-Disposition"].startswith("attachment"), name
        assert page["X-Content-Type-Options"] == "nosniff" and "sandbox" in page["Content-Security-Policy"]
    pdf = client.get(shown["report.pdf"]["url"])
    assert pdf["Content-Type"] == "application/pdf" and pdf["Content-Disposition"].startswith("attachment")
    assert client.get(shown["dot.png"]["url"] + "?download=1")["Content-Disposition"].startswith("attachment")


def test_another_users_file_and_chat_are_not_found(client, user, chat, other_user, media):
    client.force_login(user)
    mine = upload(client, chat, ("notes.txt", b"my notes")).json()["files"][0]
    client.force_login(other_user)
    assert client.get(mine["url"]).status_code == 404
    assert client.post(f"/files/{mine['id']}/remove/").status_code == 404
    assert upload(client, chat, ("x.txt", b"hi")).status_code == 404
    assert client.get("/files/not-a-uuid/").status_code == 404
    client.logout()
    assert client.get(mine["url"]).status_code == 401
    assert Attachment.objects.count() == 1 and len(stored_files(media)) == 1


def test_a_file_over_the_limit_is_refused_with_the_limit_and_nothing_is_kept(client, user, chat, media, settings):
    settings.HUB_MAX_UPLOAD_MB = 0.01  # about 10 KB
    client.force_login(user)
    answer = upload(client, chat, ("small.txt", b"fits"), ("big.bin", b"\0" * 30_000))
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == "too_large" and "big.bin" in error["message"] and "10 KB" in error["message"]
    assert error["fields"] == {"file": ["at most 10 KB"]}
    assert Attachment.objects.count() == 0 and stored_files(media) == []


def test_a_user_over_their_room_is_told_how_much_is_used(client, user, chat, media, settings):
    settings.HUB_USER_STORAGE_MB = 0.05  # about 52 KB
    client.force_login(user)
    assert upload(client, chat, ("first.txt", b"a" * 40_000)).status_code == 201
    answer = upload(client, chat, ("second.txt", b"b" * 20_000))
    assert answer.status_code == 413 and "your files use" in answer.json()["error"]["message"]
    assert list(Attachment.objects.values_list("name", flat=True)) == ["first.txt"]
    assert len(stored_files(media)) == 1


@pytest.mark.parametrize(("given", "kept"), [
    ("../../etc/passwd", "passwd"),
    ("..\\..\\boot.ini", "boot.ini"),
    ("a\x00b\x07c.txt", "abc.txt"),
    ("   .hidden  ", "hidden"),
    ("", "file"),
])
def test_file_names_are_cleaned_and_never_reach_the_storage_path(client, user, chat, media, given, kept):
    client.force_login(user)
    stored = services.upload_file(chat=chat, upload=SimpleUploadedFile("x", b"text"))
    stored_named = services.upload_file(chat=chat, upload=_named(given, b"text"))
    assert stored_named.name == kept
    assert stored_named.file.name == f"files/{user.pk}/{stored_named.pk}" and stored.file.name != stored_named.file.name
    assert all(p.is_relative_to(media) for p in stored_files(media))


def test_a_long_name_keeps_its_extension(chat):
    stored = services.upload_file(chat=chat, upload=_named("n" * 500 + ".pdf", PDF_HEAD))
    assert len(stored.name) == 200 and stored.name.endswith(".pdf")


def _named(name: str, data: bytes) -> SimpleUploadedFile:
    upload = SimpleUploadedFile("placeholder", data)
    upload._name = name  # as a client may send it, before Django's own clean-up
    return upload


def test_a_message_carries_its_files_once_and_only_its_own_chats(chat, user, media):
    report = services.upload_file(chat=chat, upload=_named("report.pdf", PDF_HEAD))
    image = services.upload_file(chat=chat, upload=_named("dot.png", png_bytes()))
    message = services.send_message(chat=chat, content="", files=[str(image.pk), str(report.pk)])
    assert [f["name"] for f in message.data["files"]] == ["dot.png", "report.pdf"]
    assert message.content == "" and set(message.files.all()) == {image, report}
    chat.refresh_from_db()
    assert chat.last_message_preview == "dot.png, report.pdf"

    with pytest.raises(Exception, match="no unsent file"):
        services.send_message(chat=chat, content="again", files=[str(report.pk)])
    other_chat = services.create_chat(owner=user, title="Elsewhere")
    stray = services.upload_file(chat=other_chat, upload=_named("stray.txt", b"stray"))
    with pytest.raises(Exception, match="no unsent file"):
        services.send_message(chat=chat, content="steal", files=[str(stray.pk)])
    with pytest.raises(Exception, match="no unsent file"):
        services.send_message(chat=chat, content="junk", files=["../../etc"])
    with pytest.raises(Exception, match="may not be empty"):
        services.send_message(chat=chat, content=" ")
    assert Message.objects.filter(chat=chat).count() == 1  # the refused sends stored nothing


def test_an_unsent_file_can_be_taken_off_and_a_sent_one_stays(client, user, chat, media):
    client.force_login(user)
    kept, dropped = upload(client, chat, ("kept.txt", b"kept"), ("dropped.txt", b"dropped")).json()["files"]
    services.send_message(chat=chat, content="with a file", files=[kept["id"]])
    answer = client.post(f"/files/{dropped['id']}/remove/")
    assert answer.status_code == 200 and answer.json()["storage"]["used"] == 4
    assert client.post(f"/files/{kept['id']}/remove/").status_code == 400
    assert list(Attachment.objects.values_list("name", flat=True)) == ["kept.txt"]


@pytest.mark.django_db(transaction=True)
def test_purging_a_chat_removes_its_files_from_storage(chat, user, media):
    services.upload_file(chat=chat, upload=_named("a.txt", b"aaa"))
    services.send_message(chat=chat, content="see", files=[str(services.upload_file(
        chat=chat, upload=_named("b.txt", b"bbb")).pk)])
    other = services.create_chat(owner=user, title="Other")
    services.upload_file(chat=other, upload=_named("c.txt", b"ccc"))
    assert len(stored_files(media)) == 3
    services.delete_chat(chat=chat)
    assert len(stored_files(media)) == 3  # the trash keeps them
    services.purge_chat(chat=chat)
    assert [p.read_bytes() for p in stored_files(media)] == [b"ccc"]


def test_a_temporary_chat_and_a_deleted_chat_take_no_files(client, user, media):
    client.force_login(user)
    temporary = services.create_chat(owner=user, title="Scratch", temporary=True)
    answer = upload(client, temporary, ("a.txt", b"a"))
    assert answer.status_code == 400 and "save the chat first" in answer.json()["error"]["message"]
    gone = services.create_chat(owner=user, title="Gone")
    services.delete_chat(chat=gone)
    with pytest.raises(Exception, match="deleted"):
        services.upload_file(chat=gone, upload=_named("a.txt", b"a"))
    assert stored_files(media) == [] and Attachment.objects.count() == 0


def test_a_files_text_is_read_into_search_with_its_file_and_progress(chat, user, media):
    from chats import search
    from chats.attachments.files import file_payload
    from tests.chats.test_reading import pdf_with_pages

    pages = [f"Page {n} of the lease. " * 20 for n in range(1, 13)]
    pages[6] = "Tenants may keep small pets such as cats with the landlord's consent."
    lease = services.upload_file(chat=chat, upload=_named("lease.pdf", pdf_with_pages(pages)))
    assert file_payload(lease)["text_status"] == "pending"
    assert services.read_file_text(file_id=str(lease.pk)) == "read"
    lease.refresh_from_db()
    assert (lease.text_status, lease.pages, lease.text_note) == ("read", 12, "")

    hits = search.search_shared(owner=user, label="files", query="pets")
    assert hits and all(hit["key"].startswith(f"{lease.pk}#") for hit in hits)  # overlapping passages
    passage = search.documents_for(owner=user, label="files").get(key=hits[0]["key"]).content
    assert re.match(r"\[lease\.pdf, page [67]\]", passage) and "[page 7]" in passage
    assert search.documents_for(owner=user, label="files").count() > 3  # the text in passages
    assert services.read_file_text(file_id=str(lease.pk)) == "read"  # a second delivery reads nothing again

    services.delete_file(attachment=lease)
    assert search.search_shared(owner=user, label="files", query="pets") == []


def test_a_file_that_cannot_be_read_is_kept_and_says_why(chat, client, user, media):
    broken = services.upload_file(chat=chat, upload=_named("broken.docx", b"PK\x03\x04 not really a zip"))
    binary = services.upload_file(chat=chat, upload=_named("blob.bin", bytes(range(256)) * 4))
    assert services.read_file_text(file_id=str(broken.pk)) == "unreadable"
    assert services.read_file_text(file_id=str(binary.pk)) == "unreadable"
    broken.refresh_from_db()
    binary.refresh_from_db()
    assert broken.text_note == "not a valid DOCX file" and binary.text_note == "binary file"
    client.force_login(user)
    assert b"".join(client.get(f"/files/{broken.pk}/").streaming_content) == b"PK\x03\x04 not really a zip"


def test_reading_stops_at_its_time_limit(tmp_path):
    from chats.attachments import reader_process
    from chats.attachments.reading import Unreadable
    from tests.chats.test_reading import pdf_with_pages

    big = tmp_path / "big.pdf"
    big.write_bytes(pdf_with_pages([f"page {n}" for n in range(1500)]))
    with pytest.raises(Unreadable, match="longer than 0 seconds"):
        reader_process.read_in_child(big, "application/pdf", seconds=0.2)


@pytest.mark.django_db(transaction=True)
def test_an_exported_chat_imports_with_its_files(chat, user, media):
    import json

    from tests.chats.test_reading import pdf_with_pages

    lease_bytes = pdf_with_pages(["The tenant may keep one cat.", "Rent is due monthly."])
    lease = services.upload_file(chat=chat, upload=_named("lease.pdf", lease_bytes))
    picture = services.upload_file(chat=chat, upload=_named("flat.png", png_bytes()))
    services.upload_file(chat=chat, upload=_named("draft.txt", b"never sent"))
    sent = services.send_message(chat=chat, content="the lease and a photo", files=[str(lease.pk), str(picture.pk)])

    exported = json.loads(json.dumps(services.export_chat(chat)))
    assert [(f["name"], f["message"]) for f in exported["files"]] == [("lease.pdf", sent.pk), ("flat.png", sent.pk)]
    copy = services.import_chat(owner=user, data=exported)

    copied = Message.objects.get(chat=copy, content="the lease and a photo")
    files = list(copied.files.order_by("created_at"))
    assert [(f.name, f.content_type, f.file.read()) for f in files] == [
        ("lease.pdf", "application/pdf", lease_bytes), ("flat.png", "image/png", png_bytes())]
    assert {f.pk for f in files}.isdisjoint({lease.pk, picture.pk})
    assert [f["id"] for f in copied.data["files"]] == [str(f.pk) for f in files]  # its own, not the original's
    assert services.read_file_text(file_id=str(files[0].pk)) == "read"  # searchable like an upload

    services.delete_chat(chat=chat)
    services.purge_chat(chat=chat)
    assert sorted(p.read_bytes() for p in stored_files(media)) == sorted([lease_bytes, png_bytes()])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broken, field", [({"data": "not base64!"}, "files[0].data"),
                                           ({"name": None}, "files[0].name")])
def test_an_import_with_a_broken_file_names_it_and_keeps_nothing(chat, user, media, broken, field):
    from hub.errors import InvalidInput

    services.send_message(chat=chat, content="see", files=[str(services.upload_file(
        chat=chat, upload=_named("a.txt", b"aaa")).pk)])
    exported = services.export_chat(chat)
    exported["files"][0].update(broken)
    with pytest.raises(InvalidInput) as refused:
        services.import_chat(owner=user, data=exported)
    assert field in refused.value.fields
    assert Attachment.objects.count() == 1 and len(stored_files(media)) == 1


@pytest.mark.django_db(transaction=True)
def test_an_import_over_the_users_room_is_refused_and_stores_nothing(chat, user, media, settings):
    from hub.errors import TooLarge

    for name in ("a.txt", "b.txt"):
        services.send_message(chat=chat, content=name, files=[str(services.upload_file(
            chat=chat, upload=_named(name, b"x" * 400_000)).pk)])
    exported = services.export_chat(chat)
    settings.HUB_USER_STORAGE_MB = 1.5  # room for one more file, not two
    with pytest.raises(TooLarge, match="does not fit"):
        services.import_chat(owner=user, data=exported)
    assert Attachment.objects.count() == 2 and len(stored_files(media)) == 2
    assert Message.objects.count() == 2  # the half-made copy is gone


@pytest.mark.django_db(transaction=True)
def test_a_fork_keeps_copies_of_its_files_when_the_original_is_purged(chat, user, media):
    note = services.upload_file(chat=chat, upload=_named("note.txt", b"keep me"))
    sent = services.send_message(chat=chat, content="a file", files=[str(note.pk)])
    fork = services.fork_chat(chat=chat, at_message=sent)
    services.delete_chat(chat=chat)
    services.purge_chat(chat=chat)

    copied = Message.objects.get(chat=fork)
    (kept,) = copied.files.all()
    assert kept.file.read() == b"keep me" and copied.data["files"][0]["id"] == str(kept.pk)
