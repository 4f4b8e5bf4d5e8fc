"""A burst of uploads on a real Celery worker: it reads at most HUB_FILE_READS_AT_ONCE files at
once (each in a child of up to 1 GB), the others wait in the queue, and every file is read."""

import time

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from chats import services
from chats.models import Attachment
from tests.chats.test_reading import pdf_with_pages

pytestmark = [pytest.mark.needs_redis, pytest.mark.needs_postgres,
              pytest.mark.django_db(transaction=True)]  # the worker reads what this test stored


def statuses_until_read(ids, *, timeout: float) -> list[list[str]]:
    """Every file's text status, looked at every 20 ms until all are read (or timeout)."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = list(Attachment.objects.filter(pk__in=ids).order_by("name").values_list("text_status", flat=True))
        seen.append(statuses)
        if statuses == ["read"] * len(ids):
            break
        time.sleep(0.02)
    return seen


def test_a_worker_reads_one_file_at_a_time_when_told_and_reads_them_all(chat, tmp_path):
    from tests.chaos.cluster import Cluster

    # The worker stores and reads under this process's data dir, so it finds the uploaded bytes.
    cluster = Cluster(tmp_path, HUB_FILE_READS_AT_ONCE=1, HUB_DATA_DIR=str(settings.DATA_DIR))
    try:
        cluster.start_workers(1, pool="threads", concurrency=4)  # threads to spare for every file
        paper = pdf_with_pages([f"page {number} of the paper" for number in range(1500)])  # a second or more
        ids = [services.upload_file(chat=chat, upload=SimpleUploadedFile(f"paper-{n}.pdf", paper)).pk
               for n in range(3)]

        seen = statuses_until_read(ids, timeout=120)
    finally:
        cluster.shutdown()

    assert seen[-1] == ["read", "read", "read"]
    assert max(statuses.count("reading") for statuses in seen) == 1
    # ...while the others waited their turn, still pending.
    assert any(statuses.count("reading") == 1 and "pending" in statuses for statuses in seen)
    assert all(Attachment.objects.get(pk=pk).pages == 1500 for pk in ids)
