"""Shared fixtures. Data is made through the real services, as a user would make it."""

import os

import pytest
from django.conf import settings
from django.test.utils import override_settings

from tests import parallel
from tests.chaos import counts as chaos_report

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
# The fake model and MCP servers the tests start listen on loopback, which the hub refuses to call
# for an address a user typed unless the operator allows it (agents_app.outbound). The hubs the
# tests start as processes inherit this; _loopback_allowed does the same in this process. The
# tests of the refusal itself clear it.
LOOPBACK = "127.0.0.0/8,::1"
os.environ.setdefault("HUB_OUTBOUND_ALLOW", LOOPBACK)
FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"


def require_service(name: str, available: bool, how: str) -> None:
    """Skip with a reason when a real service is missing; in CI a missing service is a failure."""
    if available:
        return
    message = f"needs a real {name}: {how}"
    if IN_CI:
        pytest.fail(f"{message} (CI must provide it)")
    pytest.skip(message)


def pytest_addoption(parser):
    parser.addoption(
        "--part", choices=parallel.PARTS, default="all",
        help="which part of the suite to run: the tests that may run beside others under xdist "
             "(parallel), the chaos tests and those marked `serial` (serial), those marked `alone` "
             "(alone), or all of them (all, the default)",
    )


def _empty_postgres_tables_with_delete() -> None:
    """Between transactional tests pytest-django empties every table with Django's flush, which on
    PostgreSQL is one TRUNCATE of all of them: about 0.33 s here, as it makes new files for every
    table and index. DELETE empties tables this small at once. Django's foreign keys on
    PostgreSQL are checked at commit (DEFERRABLE INITIALLY DEFERRED), so the order does not
    matter. Only this test process flushes; the hub's own code never does."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables]

    DatabaseOperations.sql_flush = sql_flush


def pytest_configure(config):
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        _empty_postgres_tables_with_delete()
    workers = config.getoption("numprocesses", default=None) or 0
    if isinstance(workers, int) and workers > 0:
        try:
            parallel.check_redis_databases(os.environ.get("REDIS_URL", ""), workers)
        except ValueError as error:
            raise pytest.UsageError(str(error)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Before an xdist worker starts pytest (and so reads Django's settings): its own Redis
    database and data directory, in its environment (tests/parallel.py)."""
    env = parallel.worker_environment(node.gateway.id, dict(os.environ), settings.DATA_DIR)
    channel = node.gateway.remote_exec("import os\nos.environ.update(channel.receive())")
    channel.send(env)
    channel.waitclose()


def _deselect(config, items, drop) -> None:
    dropped = [item for item in items if drop(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not drop(item)]


@pytest.hookimpl(trylast=True)  # after the markers other conftests add
def pytest_collection_modifyitems(config, items):
    """Tests of SQLite's own machinery do not apply on PostgreSQL: deselected there, not skipped.
    `--part` keeps the tests of one part of the suite (tests/parallel.py)."""
    if not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        _deselect(config, items, lambda item: item.get_closest_marker("sqlite_only"))
    part = config.getoption("part")
    _deselect(config, items, lambda item: not parallel.in_part(item, part))


_chaos_lines: list[dict] = []


def pytest_runtest_logreport(report):
    """The chaos tests' counts, from whichever process ran them (tests/chaos/counts.py)."""
    _chaos_lines.extend(chaos_report.lines_in(report))


def pytest_terminal_summary(terminalreporter):
    chaos_report.print_counts(terminalreporter, _chaos_lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the test item (item.rep_call...): fixtures that start servers print
    their logs when the test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_redis"):
        require_service("Redis", bool(settings.REDIS_URL), "set REDIS_URL=redis://127.0.0.1:6379/0")
    if item.get_closest_marker("needs_postgres"):
        require_service(
            "PostgreSQL",
            settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
            "set DATABASE_URL=postgres://postgres@127.0.0.1:5432/test",
        )


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """Hash the tests' passwords with MD5, as Django's testing docs advise: the default PBKDF2
    takes about 0.3 s of CPU per hash by design, which was most of the time of many tests that
    only needed a user. Hubs the tests start as processes keep the real hashers, so a test that
    logs in to one makes its user with `real_password_hashers`."""
    real = list(settings.PASSWORD_HASHERS)
    with override_settings(PASSWORD_HASHERS=[FAST_HASHER]):
        yield real


@pytest.fixture
def real_password_hashers(settings, _fast_password_hasher):
    """The hub's own hashers, for users who log in to a hub running in another process."""
    settings.PASSWORD_HASHERS = _fast_password_hasher


@pytest.fixture(autouse=True)
def _loopback_allowed(settings):
    settings.HUB_OUTBOUND_ALLOW = LOOPBACK.split(",")


@pytest.fixture(autouse=True)
def _clean_redis_state():
    """Keep cached state (throttle counts, cancel flags, temporary chats; Redis or process
    memory) from leaking between tests."""
    yield
    from django.core.cache import cache

    from chats.temporary import images

    cache.clear()  # with Redis, temporary chats go with it
    if isinstance(images._images, images.MemoryImages):
        images._images = None  # the embedded store of temporary chats


@pytest.fixture(autouse=True)
def _no_dead_database_connection():
    """Each test starts with a live database connection or none. Tests that cut or restart the
    database leave connections it ended wherever this process kept one; the next test to use
    such a connection (after its own set-up, even in its teardown) would fail for nothing it did."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.is_usable():
            conn.close()
    yield


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of the test's own on a free port (tests.chaos.redis_server)."""
    from tests.chaos.redis_server import RedisServer

    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def make_user(django_user_model):
    counter = {"n": 0}

    def make(username=None, password="pass-for-tests-1"):
        counter["n"] += 1
        return django_user_model.objects.create_user(username or f"user{counter['n']}", password=password)

    return make


@pytest.fixture
def user(make_user):
    return make_user("alice")


@pytest.fixture
def other_user(make_user):
    return make_user("mallory")


@pytest.fixture
def make_agent():
    from agents_app.services import create_agent

    def make(owner, name="Helper", model="test:scripted", **fields):
        return create_agent(owner=owner, name=name, model=model, **fields)

    return make


@pytest.fixture
def chat(user):
    from chats.services import create_chat

    return create_chat(owner=user, title="Plans")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    # Threads of database_sync_to_async keep persistent connections, which would block dropping
    # the test database at the end; tests close each connection after use instead.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


@pytest.fixture
def run_now():
    """Execute queued runs in this process, in order, as a worker would (no broker needed)."""
    from agents_app.models import Run
    from agents_app.turns.execution import execute_run

    def run(limit=20):
        outcomes = []
        for _ in range(limit):
            queued = Run.objects.filter(status=Run.Status.QUEUED).order_by("created_at").first()
            if queued is None:
                break
            outcomes.append(execute_run(queued.pk))
        return outcomes

    return run


@pytest.fixture
def fake():
    """The fake OpenAI- and Anthropic-compatible model server, answering over real HTTP."""
    from agents_app.fake_provider import FakeProvider

    with FakeProvider() as server:
        yield server


@pytest.fixture
def no_provider_environment(monkeypatch, settings):
    """Turns reach only the test's own model server: no provider key or URL from the environment,
    no retries, no monthly token limit."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings.HUB_MODEL_MAX_RETRIES = 0
    settings.HUB_MONTHLY_TOKENS = 0
