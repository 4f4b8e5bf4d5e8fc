"""Files in an S3-compatible bucket (HUB_STORAGE_URL), over real HTTP to moto's S3 server: upload,
download, reading the text (through a local copy) and removal go to the bucket."""

import boto3
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from moto.server import ThreadedMotoServer

from chats import services
from hub.environment import storage_from_url
from tests.chats.test_reading import pdf_with_pages

pytestmark = pytest.mark.django_db


@pytest.fixture
def bucket(settings):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    s3 = boto3.client("s3", endpoint_url=f"http://{host}:{port}", aws_access_key_id="hub",
                      aws_secret_access_key="secret", region_name="us-east-1")
    s3.create_bucket(Bucket="hub-files")
    settings.STORAGES = {**settings.STORAGES, "default": storage_from_url(
        f"s3://hub:secret@{host}:{port}/hub-files?secure=false", "unused")}
    yield s3
    server.stop()


def stored_keys(s3) -> list[str]:
    return [item["Key"] for item in s3.list_objects_v2(Bucket="hub-files").get("Contents", [])]


def test_files_go_to_the_bucket_and_come_back(bucket, client, user, chat, django_capture_on_commit_callbacks):
    client.force_login(user)
    pdf = pdf_with_pages(["The boiler is serviced every spring."] * 2)
    answer = client.post(f"/chats/{chat.pk}/files/", {"file": [SimpleUploadedFile("boiler.pdf", pdf)]})
    assert answer.status_code == 201, answer.content
    shown = answer.json()["files"][0]
    assert stored_keys(bucket) == [f"files/{user.pk}/{shown['id']}"]

    download = client.get(shown["url"])
    assert b"".join(download.streaming_content) == pdf

    assert services.read_file_text(file_id=shown["id"]) == "read"
    with django_capture_on_commit_callbacks(execute=True):  # the bytes go once the deletion commits
        services.delete_file(attachment=chat.files.get())
    assert stored_keys(bucket) == []


def test_a_storage_url_that_is_not_a_bucket_is_refused_at_start():
    from hub.environment import ConfigurationError

    for url in ("s3://host/", "http://key:secret@host/bucket", "s3://key:secret@host/a/b"):
        with pytest.raises(ConfigurationError, match="HUB_STORAGE_URL"):
            storage_from_url(url, "unused")
