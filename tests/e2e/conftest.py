"""Browser tests: Debian's Chromium, driven by Playwright, against a real running hub.

The hub under test is the production shape: Daphne serving hub.asgi and a real Celery worker
process, both on the PostgreSQL test database pytest-django made and on Redis (channel layer,
broker, replay buffers). One hub serves the package's tests in each pytest process (started once,
a few seconds; under `make test` each xdist worker that runs files of this package starts its own,
on that worker's test database and Redis database); every test makes its own user and data through
the real services, and tables are flushed after it (`django_db(transaction=True)`).

Markers, and why the suite runs exactly once in CI: every test here is marked `e2e`,
`needs_postgres` and `needs_redis` (below, in pytest_collection_modifyitems). CI first runs
`make test` with DATABASE_URL and REDIS_URL set — the e2e tests run there — and then
`make test-embedded -m "not needs_redis and not needs_postgres"`, which deselects them. Without
PostgreSQL, Redis or /usr/bin/chromium they are skipped locally and fail in CI (tests/conftest.py
require_service). `pytest -m e2e` runs only them.
"""

import os
import re
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import require_service

HERE = Path(__file__).resolve().parent
SCREENSHOTS = HERE / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# The hub's own limit, small so the too-long test types little.
MESSAGE_LIMIT = 2000


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.needs_postgres)
            item.add_marker(pytest.mark.needs_redis)
            item.add_marker(pytest.mark.django_db(transaction=True))


@pytest.fixture(autouse=True)
def _clean_redis_state():
    """Overrides the suite's flush of Redis after each test: the hub under test lives on that
    Redis for the whole session (its broker queues and channel groups), and every key a test
    leaves is named by ids that are never reused."""
    yield


@pytest.fixture(scope="package")
def hub(django_db_setup, django_db_blocker, tmp_path_factory):
    """Daphne and one Celery worker on the test database, for all of tests/e2e (and stopped after
    it, so no worker of ours outlives these tests); yields the cluster with .base."""
    from tests.chaos.cluster import Cluster, wait_for

    if not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")):
        pytest.skip("the hub under test needs PostgreSQL and Redis")
    log_dir = tmp_path_factory.mktemp("e2e-hub")
    # The same SECRET_KEY as this process, so a session made here logs the browser in there.
    cluster = Cluster(log_dir, SECRET_KEY=settings.SECRET_KEY, HUB_MAX_MESSAGE_CHARS=MESSAGE_LIMIT,
                      HUB_STALL_SECONDS=30)
    try:
        with django_db_blocker.unblock():
            worker = cluster._spawn_worker("threads", 4)  # boots while Daphne starts
            cluster.base = cluster.start_daphne()
            cluster.port = int(cluster.base.rsplit(":", 1)[1])
            wait_for(worker.is_ready, timeout=60, what="the worker to answer a ping", every=0.2)
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module. Not per session: Playwright's sync API keeps an asyncio loop
    running in this thread while it lives, and tests after these must not find one."""
    require_service("Chromium", os.path.exists(CHROMIUM), "apt-get install chromium")
    from playwright.sync_api import sync_playwright

    # That running loop makes Django refuse ORM calls here ("async context"); the test's own
    # queries are plain sync code, so the check is lifted while the browser lives.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def proxy(hub):
    from tests.e2e.proxy import TcpProxy

    tcp = TcpProxy(hub.port)
    yield tcp
    tcp.close()


class ConsoleWatch:
    """Every console error and uncaught exception of the test's pages; none may be left over."""

    def __init__(self):
        self.errors: list[str] = []
        self.allowed: list[re.Pattern] = []

    def attach(self, page, label: str) -> None:
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"{label} console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"{label} uncaught: {e}"))

    def allow(self, pattern: str) -> None:
        """An error the test causes on purpose (a refused websocket while the hub is cut off)."""
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


@pytest.fixture
def console():
    watch = ConsoleWatch()
    yield watch
    assert watch.unexpected() == [], "errors in the browser console"


@pytest.fixture
def open_page(browser, hub, console):
    """open_page(user, path="/", base=None, clock=None, **context options) -> a logged-in page at path."""
    from django.test import Client

    contexts = []

    def open_(user, path="/", *, base=None, label=None, clock=None, **options):
        client = Client()
        client.force_login(user)
        context = browser.new_context(viewport=options.pop("viewport", {"width": 1280, "height": 820}), **options)
        contexts.append(context)
        session = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "domain": "127.0.0.1",
                              "path": "/"}])
        page = context.new_page()
        page.set_default_timeout(10_000)
        console.attach(page, label or f"tab{len(contexts)}")
        if clock is not None:
            page.clock.install(time=clock)  # the page's Date.now() and timers start from here
        page.goto((base or hub.base) + path)
        page.wait_for_selector("body.js-ready")
        return page

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture(autouse=True)
def _no_turn_left_running(request):
    """A turn still streaming when the test ends is cancelled first, so the table flush after the
    test never races a worker's writes."""
    yield
    if "hub" not in request.fixturenames:
        return
    from agents_app.models import Run
    from agents_app.turns import runs

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        live = list(Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]))
        if not live:
            return
        for run in live:
            runs.request_cancel(run)
        time.sleep(0.1)


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ada", password="pass-for-tests-1")


@pytest.fixture
def screenshot():
    """screenshot(page, name): saved to tests/e2e/screenshots/<name>.png (git-ignored)."""
    SCREENSHOTS.mkdir(exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path))
        return path

    return take
