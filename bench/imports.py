"""Importing a ChatGPT export of 1,000 conversations, as a user does it, from upload to done.

The production layout on one machine (bench.live_hub: Daphne, a Celery worker, a private
PostgreSQL and Redis). A user with a logged-in session opens the Import and export page, as a
browser does, for its CSRF token and cookie, and uploads the export (tests.chats.export_samples:
ChatGPT's real format, a zip holding conversations.json, with regenerated answers and edited
questions as branches) to POST /api/v1/transfers/ as the page does. The job runs in the worker.
Timed: from the upload's start to the job's `done` (read from GET /api/v1/transfers/<id>/ every
POLL_S), and its legs (the upload's answer; the worker's run, from transfer.created_at to
finished_at). Then every conversation is looked for by the word only it holds (search, as the
user's search does), and the figure is set beside its target: TARGET_S.

Runs in about a minute. Everything talks to 127.0.0.1 only.
"""

import os
import re
import time

from bench import cpu, live_hub
from bench.live_hub import log

CONVERSATIONS = int(os.environ.get("BENCH_IMPORTS_CONVERSATIONS", "1000"))
TURNS = int(os.environ.get("BENCH_IMPORTS_TURNS", "5"))
TARGET_S = 60.0
POLL_S = 0.1
WORKERS = 1
CONCURRENCY = 2
DATABASE = "hub_bench_imports"
WAIT_SECONDS = 600


def make_importer() -> dict:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("importer", password=None)
    return {"user_id": user.pk, "cookie": live_hub.session_cookie(user)}


def page_headers(base: str, importer: dict) -> dict:
    """The Import and export page's CSRF cookie and token, as the page's upload sends them."""
    import httpx
    from django.conf import settings

    page = httpx.get(f"{base}/transfers/", headers={"Cookie": importer["cookie"]}, timeout=30)
    page.raise_for_status()
    token = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text).group(1)
    cookie = page.cookies[settings.CSRF_COOKIE_NAME]
    return {"Cookie": f"{importer['cookie']}; {settings.CSRF_COOKIE_NAME}={cookie}", "X-CSRFToken": token,
            "Origin": base, "Accept": "application/json"}


def import_through_the_page(base: str, headers: dict, data: bytes) -> dict:
    import httpx

    with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
        began = time.monotonic()
        answer = client.post("/api/v1/transfers/", data={"kind": "import", "format": "auto"},
                             files={"file": ("chatgpt-export.zip", data, "application/zip")})
        uploaded = time.monotonic()
        if answer.status_code != 201:
            raise RuntimeError(f"the upload answered {answer.status_code}: {answer.text[:300]}")
        job = answer.json()
        while job["status"] not in ("done", "failed"):
            if time.monotonic() - began > WAIT_SECONDS:
                raise RuntimeError(f"the import was not done within {WAIT_SECONDS} s: {job}")
            time.sleep(POLL_S)
            job = client.get(f"/api/v1/transfers/{job['id']}/").json()
        done = time.monotonic()
    if job["status"] != "done":
        raise RuntimeError(f"the import failed: {job['error']}")
    return {"job": job, "upload_s": uploaded - began, "upload_to_done_s": done - began}


def searchable(user_id: int) -> int:
    """How many conversations are found by the word only they hold."""
    from django.contrib.auth import get_user_model

    from chats import search
    from tests.chats import export_samples

    owner = get_user_model().objects.get(pk=user_id)
    return sum(1 for n in range(1, CONVERSATIONS + 1)
               if len(search.search_messages(owner=owner, query=export_samples.marker(n), limit=2)) == 1)


def worker_seconds(transfer_id: str) -> float:
    from chats.models import Transfer

    transfer = Transfer.objects.get(pk=transfer_id)
    return (transfer.finished_at - transfer.created_at).total_seconds()


def run() -> dict:
    from tests.chats import export_samples

    began = time.monotonic()
    speed = cpu.python_speed_ms()
    log(f"a million Python additions take {speed} ms on this machine now")
    conversations = export_samples.chatgpt_export(CONVERSATIONS, turns=TURNS)
    data = export_samples.as_zip(conversations)
    json_mb = len(export_samples.as_json(conversations)) / 2**20
    log(f"{CONVERSATIONS} conversations: conversations.json {json_mb:.1f} MB, zipped {len(data) / 2**20:.1f} MB")
    with live_hub.running_hub(database=DATABASE, workers=WORKERS, concurrency=CONCURRENCY) as hub:
        live_hub.setup_django(hub.env)
        importer = make_importer()
        live_hub.close_django_connections()
        live_hub.wait_for_workers(hub, WORKERS)
        headers = page_headers(hub.base, importer)
        log("uploading the export and waiting for the import")
        result = import_through_the_page(hub.base, headers, data)
        log(f"done in {result['upload_to_done_s']:.1f} s; checking search")
        found = searchable(importer["user_id"])
        in_worker = worker_seconds(result["job"]["id"])
    seconds = result["upload_to_done_s"]
    report = result["job"]["report"]
    return {
        "config": {"conversations": CONVERSATIONS, "turns": TURNS, "workers": WORKERS,
                   "threads_per_worker": CONCURRENCY, "conversations_json_mb": round(json_mb, 1),
                   "upload_mb": round(len(data) / 2**20, 2)},
        "python_speed_ms": speed,
        "imported": report["imported"],
        "skipped": report["skipped"],
        "upload_s": round(result["upload_s"], 2),
        "job_s": round(in_worker, 2),
        "upload_to_done_s": round(seconds, 2),
        "conversations_per_s": round(CONVERSATIONS / seconds, 1),
        "searchable": found,
        "all_searchable": found == CONVERSATIONS,
        "target_s": TARGET_S,
        "met": seconds < TARGET_S and found == CONVERSATIONS and report["imported"] == CONVERSATIONS,
        "elapsed_s": round(time.monotonic() - began, 1),
    }
