"""Every page of the app and of the admin works under the Content-Security-Policy, in Chromium.

The hub under test is the production shape (Daphne and a Celery worker on the test database, as
in tests/e2e) with sign-up open. Each page is opened in a real Chromium that records every
`securitypolicyviolation` event and every console line about the policy; a page passes when it
carried the header, rendered what a person expects to see there, and nothing was blocked.
"""

import re
import time

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group
from django.test import Client, RequestFactory
from django.urls import reverse
from playwright.sync_api import expect

from agents_app import remotes
from agents_app import secrets as agent_secrets
from agents_app.models import Run
from chats import memory, search
from chats import services as chat_services
from chats.models import Chat
from hub.services import create_api_token
from tests.e2e.conftest import _clean_redis_state, _no_turn_left_running, browser  # noqa: F401 (fixtures)
from tests.e2e.helpers import chat_with, message_item, reply_of, scripted_agent, send, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.needs_postgres, pytest.mark.needs_redis,
              pytest.mark.django_db(transaction=True)]

# Recorded before any script of the page runs; Playwright injects it outside the page's policy.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.effectiveDirective} blocked ${event.blockedURI || "inline"} `
    + `at ${event.sourceFile}:${event.lineNumber} ${event.sample}`);
}, true);
"""


@pytest.fixture(scope="module")
def hub(django_db_setup, django_db_blocker, tmp_path_factory):
    """Daphne and one Celery worker on the test database, with sign-up open (its default is off)."""
    from tests.chaos.cluster import Cluster, wait_for

    if not (settings.REDIS_URL and settings.DATABASES["default"]["ENGINE"].endswith("postgresql")):
        pytest.skip("the hub under test needs PostgreSQL and Redis")
    cluster = Cluster(tmp_path_factory.mktemp("csp-hub"), SECRET_KEY=settings.SECRET_KEY, HUB_ALLOW_SIGNUP="true")
    try:
        with django_db_blocker.unblock():
            worker = cluster._spawn_worker("threads", 2)
            cluster.base = cluster.start_daphne()
            cluster.port = int(cluster.base.rsplit(":", 1)[1])
            wait_for(worker.is_ready, timeout=60, what="the worker to answer a ping", every=0.2)
        yield cluster
    finally:
        cluster.shutdown()


class PolicyWatch:
    """A browser context (logged in as `user`, or not) whose pages are checked one by one."""

    def __init__(self, chromium, hub, user=None):
        self.hub = hub
        self.context = chromium.new_context(viewport={"width": 1280, "height": 820})
        self.context.add_init_script(RECORD_VIOLATIONS)
        if user is not None:
            client = Client()
            client.force_login(user)
            self.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "domain": "127.0.0.1", "path": "/",
                                       "value": client.cookies[settings.SESSION_COOKIE_NAME].value}])
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.console: list[str] = []
        self.page.on("console", lambda line: "Content Security Policy" in line.text and self.console.append(line.text))
        self.checked: list[str] = []
        # Requests not yet answered, so a page that never goes quiet names what it waits on.
        self.in_flight: dict = {}
        self.page.on("request", lambda request: self.in_flight.__setitem__(request, time.monotonic()))
        self.page.on("requestfinished", lambda request: self.in_flight.pop(request, None))
        self.page.on("requestfailed", lambda request: self.in_flight.pop(request, None))

    def visit(self, path: str, shows: str, *, status: int = 200):
        """Open path; it must answer with the policy and render `shows` (a selector)."""
        response = self.page.goto(self.hub.base + path)
        assert response.status == status, f"{path} answered {response.status}"
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, f"{path}: no policy"
        expect(self.page.locator(shows).first).to_be_visible()
        self.settle(path)
        return self.page

    def settle(self, label: str):
        """Wait until the page is quiet, then require that nothing it did was blocked."""
        self.wait_until_quiet(label)
        violations = self.page.evaluate("window.__cspViolations")
        assert violations == [], f"{label}: {violations}"
        assert self.console == [], f"{label}: {self.console}"
        self.checked.append(label)

    def wait_until_quiet(self, label: str, *, quiet: float = 0.5, timeout: float = 30):
        """Until the page has loaded and no request of it was unanswered for `quiet` seconds.
        Counted from the page's own request events: Chromium's network-idle signal was once
        missed under load with nothing left unanswered. Half a minute: four test processes with
        their browsers can load both cores."""
        self.page.wait_for_load_state("load")
        deadline = time.monotonic() + timeout
        quiet_since = None
        while True:
            now = time.monotonic()
            if self.in_flight:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= quiet:
                return
            if now > deadline:
                waiting = [f"{request.method} {request.url} ({now - began:.1f} s)"
                           for request, began in self.in_flight.items()]
                raise AssertionError(f"{label}: the page never went quiet; unanswered: {waiting}")
            self.page.wait_for_timeout(50)  # lets the page's request events arrive

    def close(self):
        self.context.close()


@pytest.fixture
def watch(browser, hub):  # noqa: F811 (browser is the fixture imported above)
    opened = []

    def open_(user=None) -> PolicyWatch:
        opened.append(PolicyWatch(browser, hub, user))
        return opened[-1]

    yield open_
    for item in opened:
        item.close()


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("grace", password="pass-for-tests-1", is_staff=True,
                                                 is_superuser=True)


def test_pages_before_log_in(watch):
    visitor = watch()
    visitor.visit("/login/", "form input[name=password]")
    visitor.visit("/signup/", "form button[type=submit]:has-text('Sign up')")
    visitor.visit("/api/v1/docs/", "#swagger-ui .opblock")
    visitor.visit("/s/no-such-link/", "h1:has-text('Not found')", status=404)


def test_every_page_of_the_app(watch, hub, staff):
    # An avatar at another origin (localhost is not 127.0.0.1): avatars may be at any http(s) address.
    avatar = f"http://localhost:{hub.port}/static/favicon.svg"
    agent = scripted_agent(staff, "Scribe", "Noted: {prompt}. **Bold** and `code`.", avatar=avatar)
    chat = chat_with(staff, agent, title="Policy check")
    memory.append(owner=staff, text="Prefers short answers.")
    tab = watch(staff)

    page = tab.visit("/", "body.js-ready .dir-item:has-text('Policy check')")
    page.locator("#directory-search").fill("Policy")  # the directory searches as one types
    expect(page.locator(".dir-item")).to_have_count(1)
    tab.settle("the directory, searched")
    page = tab.visit(f"/chats/{chat.pk}/", "body.js-ready #composer-input")
    send(page, "Hello there")
    reply = wait_until(lambda: reply_of(agent, chat), what="the reply")
    expect(message_item(page, reply.pk)).to_have_class(re.compile("status-final"), timeout=15_000)
    expect(message_item(page, reply.pk).locator(".msg-content strong")).to_have_text("Bold")
    image = page.locator(f'img[src="{avatar}"]').first
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth > 0"), "the avatar did not load"
    tab.settle("the chat after a streamed reply")

    link = chat_services.share_chat(chat=chat)
    tab.visit("/shares/", ".share-row:has-text('Policy check')")
    watch().visit(f"/s/{link.token}/", "body.js-ready .msg-agent .msg-content strong:has-text('Bold')")
    tab.visit("/memory/", "text=Prefers short answers.")
    tab.visit("/agents/", "text=Scribe")
    tab.visit("/agents/new/", "form button[type=submit]")
    tab.visit(f"/agents/{agent.pk}/", "form button[type=submit]")
    tab.visit("/agents/keys/", "form button[type=submit]")
    tab.visit("/agents/remotes/", "form button[type=submit]")
    tab.visit("/usage/", "#usage-totals")
    tab.visit(reverse("invitations"), "main h1")
    tab.visit("/no-such-page/", "h1:has-text('Not found')", status=404)

    page = tab.visit("/settings/tokens/", "form button[type=submit]")
    page.locator("input[name=name]").fill("laptop")
    page.locator("button:has-text('Make token')").click()
    field = page.locator("#new-token")
    expect(field).to_be_visible()
    field.click()  # selects the whole token, so it copies in one go (static/js/select-on-click.js)
    selected = field.evaluate("input => input.value.substring(input.selectionStart, input.selectionEnd)")
    assert selected == field.input_value() and selected.startswith("hub_")
    tab.settle("the new API token")

    page = tab.visit("/api/v1/docs/", "#swagger-ui .opblock")
    assert page.locator("#swagger-ui .opblock").count() > 10, "Swagger UI rendered no operations"
    page.locator("#swagger-ui .opblock-summary").first.click()  # an operation opens, with its examples
    expect(page.locator("#swagger-ui .opblock-body").first).to_be_visible()
    tab.settle("an operation opened in the API reference")


def _admin_data(staff, hub):
    """One row of every model the admin shows, each made the way the hub makes it."""
    agent = scripted_agent(staff, "Archivist", "Filed: {prompt}.")
    chat = chat_with(staff, agent, title="Admin tour")
    chat_services.send_message(chat=chat, content="Start a thread", new_thread_title="Side topic")
    wait_until(lambda: Run.objects.filter(chat=chat, status=Run.Status.SUCCEEDED).exists(), what="a finished run")
    memory.append(owner=staff, text="Likes tables.")
    search.index_shared(owner=staff, label="notes", key="one", content="A shared note.")
    remotes.create_remote(owner=staff, name="Tools", url="https://93.184.215.14/mcp")
    agent_secrets.store_key(owner=staff, provider="openai", key="sk-test-only-12345678")
    create_api_token(user=staff, name="script")
    Group.objects.create(name="Support")  # Django's own model; it has no service of ours
    return chat


def _admin_pages(staff):
    """(path, selector) for each registered model's change list and one change form (the add form
    when there is no row to open, if the admin lets staff add one)."""
    request = RequestFactory().get("/admin/")
    request.user = staff
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        name = f"{opts.app_label}_{opts.model_name}"
        yield reverse(f"admin:{name}_changelist"), "#changelist, #content-main"
        item = model._default_manager.order_by("pk").first()
        if item is not None:
            yield reverse(f"admin:{name}_change", args=[item.pk]), "#content-main"
        elif model_admin.has_add_permission(request):
            yield reverse(f"admin:{name}_add"), "#content-main form"


def test_every_page_of_the_admin(watch, hub, staff):
    chat = _admin_data(staff, hub)
    spare = chat_services.create_chat(owner=staff, title="To the trash")
    tab = watch(staff)

    # The object-action buttons ask first (static/js/admin-confirm.js): no, then yes.
    page = tab.visit(reverse("admin:chats_chat_change", args=[spare.pk]), ".hub-object-actions")
    button = page.locator(".hub-object-actions button", has_text="Move to the trash")
    page.once("dialog", lambda dialog: dialog.dismiss())
    button.click()
    tab.wait_until_quiet("a dismissed action")
    spare.refresh_from_db()
    assert spare.deleted_at is None, "dismissing the question still ran the action"
    page.once("dialog", lambda dialog: dialog.accept())
    button.click()
    wait_until(lambda: Chat.objects.filter(pk=spare.pk, deleted_at__isnull=False).exists(), what="the trash")
    assert LogEntry.objects.filter(object_id=str(spare.pk)).exists()
    tab.settle("an object action")

    tab.visit(reverse("admin:index"), "#hub-support")
    tab.visit(reverse("admin-health"), ".hub-verdict")
    tab.visit(reverse("admin-repair"), "input[type=checkbox]")
    tab.visit(reverse("admin-repair") + "?run=1", ".hub-verdict")
    tab.visit(reverse("admin-usage"), ".hub-cards")
    run = Run.objects.filter(chat=chat).first()
    tab.visit(reverse("admin:agents_app_run_timeline", args=[run.pk]), "table.hub-wide")
    for path, shows in _admin_pages(staff):
        tab.visit(path, shows)
    assert len(tab.checked) > 2 * len(admin.site._registry), tab.checked
