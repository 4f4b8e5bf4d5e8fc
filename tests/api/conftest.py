"""Fixtures of the API tests: users with tokens, an in-process API client, and a live hub.

The live hub is `manage.py runhub` (Daphne with a Celery worker and beat in it) on the test
database — PostgreSQL and Redis when the suite runs on them, SQLite and memory otherwise — so
streams, tokens and the schema are exercised over real HTTP with real turns. Tests that use it
commit their data (transactional tests), so the hub's process sees it.
"""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.chaos.cluster import free_port, test_database_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    """Throttle counts live in the cache; in embedded mode (memory) nothing else clears them."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def token_for():
    from hub.services import create_api_token

    def make(user, name="tests"):
        return create_api_token(user=user, name=name)[1]

    return make


@pytest.fixture
def api_for(token_for):
    """An in-process DRF client authenticated with a fresh token of user."""
    from rest_framework.test import APIClient

    def make(user):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(user)}")
        return client

    return make


@pytest.fixture
def api(api_for, user):
    return api_for(user)


@pytest.fixture
def scripted(make_agent):
    def make(owner, name="Scribe", reply="Hello {prompt}, nice to meet you.", chunk=4, delay=0.0, **options):
        script = {"reply": reply, "chunk": chunk, "delay": delay, **options}
        return make_agent(owner, name=name, model="test:scripted", settings={"script": script})

    return make


def _database_env() -> dict:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return {"HUB_SQLITE_NAME": str(db["NAME"])}
    return {"DATABASE_URL": test_database_url(), "REDIS_URL": settings.REDIS_URL}


@pytest.fixture(scope="package")
def live_hub(django_db_setup, django_db_blocker, tmp_path_factory):
    """A running hub on the test database; yields its base URL. Stopped (by its pid) after the package."""
    with running_hub(tmp_path_factory.mktemp("live-hub")) as base:
        yield base


@contextlib.contextmanager
def running_hub(log_dir):
    """`manage.py runhub` (with its worker) on the test database while the block runs; its base URL.

    Its worker takes every task sent meanwhile: a test module that also runs turns in the test's
    own process (run_now) keeps this hub to the module that needs it.
    """
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"} and not k.startswith("HUB_")}
    env.update(_database_env())
    env.update({"HUB_DATA_DIR": str(log_dir / "var"), "SECRET_KEY": settings.SECRET_KEY, "DEBUG": "false",
                "ALLOWED_HOSTS": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "WARNING",
                "HUB_API_SEND_RATE": "10000/min"})
    port = free_port()
    log = open(log_dir / "runhub.log", "wb")  # noqa: SIM115  (closed below)
    process = subprocess.Popen([sys.executable, "manage.py", "runhub", "--port", str(port), "--concurrency", "2"],
                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 40
    while True:
        try:
            if httpx.get(f"{base}/api/v1/schema/", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.close()
            pytest.fail("the live hub did not start:\n" + (log_dir / "runhub.log").read_text(errors="replace"))
        time.sleep(0.2)
    yield base
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
    log.close()


@pytest.fixture
def http(live_hub):
    """An httpx client of the live hub (no credentials)."""
    with httpx.Client(base_url=live_hub, timeout=20) as client:
        yield client
