"""Sign-up is closed once the hub has an account: open with HUB_ALLOW_SIGNUP, or by invitation link."""

import os
import re
import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from hub import services
from hub.models import Invitation
from tests.conftest import require_service

pytestmark = pytest.mark.django_db
User = get_user_model()
NEW_ACCOUNT = {"username": "newcomer", "password1": "a-long-pass-9", "password2": "a-long-pass-9"}


@pytest.fixture(autouse=True)
def _fresh_counts():
    """Sign-ups are throttled per address in the cache; in embedded mode nothing else clears it."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def staff(make_user):
    person = make_user("sam")
    person.is_staff = True
    person.save(update_fields=["is_staff"])
    return person


def signed_in(client, response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in client.session


def make_link(client, note="for Nina") -> str:
    page = client.post(reverse("invitations"), {"note": note})
    assert page.status_code == 200, page.content
    html = page.content.decode()
    # A copy button run by a module: nothing inline that a Content-Security-Policy would block.
    assert 'data-copy="new-invitation"' in html and "js/copy.js" in html and " onclick=" not in html
    return re.search(r'value="(http://testserver/signup/\?invite=inv_[^"]+)"', html).group(1)


def test_the_first_account_signs_up_on_an_empty_hub():
    assert Client().get(reverse("login")).content.count(b'href="/signup/"') == 1
    client = Client()
    assert signed_in(client, client.post(reverse("signup"), NEW_ACCOUNT))
    assert User.objects.get().username == "newcomer"


def test_after_the_first_account_sign_up_says_it_is_by_invitation(user):
    page = Client().get(reverse("signup"))
    assert page.status_code == 403 and b"Sign-up is by invitation" in page.content
    assert b"<form" not in page.content
    refused = Client().post(reverse("signup"), NEW_ACCOUNT)
    assert refused.status_code == 403 and not User.objects.filter(username="newcomer").exists()
    assert b'href="/signup/"' not in Client().get(reverse("login")).content


def test_hub_allow_signup_opens_it_as_before(user, settings):
    settings.HUB_ALLOW_SIGNUP = True
    assert b'href="/signup/"' in Client().get(reverse("login")).content
    assert Client().get(reverse("signup")).status_code == 200
    client = Client()
    assert signed_in(client, client.post(reverse("signup"), NEW_ACCOUNT))


def test_staff_make_a_link_shown_once_that_makes_one_account(staff):
    inviter = Client()
    inviter.force_login(staff)
    assert b'href="/settings/invitations/"' in inviter.get(reverse("api_tokens")).content
    link = make_link(inviter)
    listed = inviter.get(reverse("invitations")).content.decode()
    assert link.split("=")[1] not in listed and "for Nina" in listed  # shown once; recognisable after

    guest = Client()
    form = guest.get(link)
    assert form.status_code == 200 and b"You were invited" in form.content
    assert signed_in(guest, guest.post(link, NEW_ACCOUNT))
    invitation = Invitation.objects.get()
    assert invitation.used_by.username == "newcomer" and invitation.used_at is not None
    assert "used by newcomer" in inviter.get(reverse("invitations")).content.decode()

    again = Client().post(link, NEW_ACCOUNT | {"username": "second"})
    assert again.status_code == 403 and b"already used" in again.content
    assert not User.objects.filter(username="second").exists()


def test_an_ordinary_user_invites_only_when_the_hub_allows_it(user, settings):
    client = Client()
    client.force_login(user)
    assert client.get(reverse("invitations")).status_code == 404
    assert client.post(reverse("invitations"), {"note": "x"}).status_code == 404
    assert b'href="/settings/invitations/"' not in client.get(reverse("api_tokens")).content
    assert not Invitation.objects.exists()

    settings.HUB_ALLOW_INVITES = True
    assert b'href="/settings/invitations/"' in client.get(reverse("api_tokens")).content
    link = make_link(client)
    # Turning it off again takes back the links such users made.
    settings.HUB_ALLOW_INVITES = False
    refused = Client().get(link)
    assert refused.status_code == 403 and b"no longer valid" in refused.content


def test_revoked_expired_and_made_up_links_are_refused(staff):
    inviter = Client()
    inviter.force_login(staff)
    revoked_link = make_link(inviter, note="revoke me")
    invitation = Invitation.objects.get(note="revoke me")
    assert inviter.post(reverse("invitation_revoke", args=[invitation.pk])).status_code == 302
    page = Client().post(revoked_link, NEW_ACCOUNT)
    assert page.status_code == 403 and b"withdrawn" in page.content

    expired_link = make_link(inviter, note="old")
    Invitation.objects.filter(note="old").update(expires_at=timezone.now())  # its days have passed
    assert b"has expired" in Client().get(expired_link).content

    assert b"is not valid" in Client().get(reverse("signup") + "?invite=inv_made-up").content
    assert not User.objects.filter(username="newcomer").exists()


def test_another_users_invitation_cannot_be_revoked(staff, make_user):
    other = make_user("olga")
    other.is_staff = True
    other.save(update_fields=["is_staff"])
    invitation, raw = services.create_invitation(user=staff)
    client = Client()
    client.force_login(other)
    assert client.post(reverse("invitation_revoke", args=[invitation.pk])).status_code == 404
    assert Client().get(reverse("signup") + f"?invite={raw}").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_an_invitation_used_at_once_by_several_makes_one_account(staff):
    _, raw = services.create_invitation(user=staff)
    start = threading.Barrier(4)
    outcomes = []

    def sign_up(n):
        try:
            start.wait()
            services.sign_up(username=f"racer{n}", password="a-long-pass-9", invitation_token=raw)
            outcomes.append("made")
        except services.InvitationNotUsable:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_up, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["made", "refused", "refused", "refused"]
    assert User.objects.filter(username__startswith="racer").count() == 1
    assert Invitation.objects.get().used_by.username.startswith("racer")


def test_staff_see_invitations_in_the_admin_and_can_only_withdraw_them(staff):
    invitation, _ = services.create_invitation(user=staff, note="for the admin")
    client = Client()
    client.force_login(staff)
    staff.is_superuser = True
    staff.save(update_fields=["is_superuser"])
    listing = client.get("/admin/hub/invitation/")
    assert listing.status_code == 200 and invitation.prefix in listing.content.decode()
    assert invitation.digest not in listing.content.decode()
    assert client.get("/admin/hub/invitation/add/").status_code == 403
    client.post("/admin/hub/invitation/", {"action": "revoke", "_selected_action": [invitation.pk]})
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None


@pytest.fixture
def chromium():
    path = "/usr/bin/chromium"
    require_service("Chromium", os.path.exists(path), "apt-get install chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's ORM calls are plain sync code.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=path, args=["--headless", "--no-sandbox"])
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


# Like the other browser tests, run once in CI: in the PostgreSQL pass.
@pytest.mark.e2e
@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_staff_copy_a_link_and_a_guest_signs_up_with_it(staff, live_server, chromium):
    context = chromium.new_context(base_url=live_server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/login/?next=/settings/tokens/")
    page.fill("#id_username", "sam")
    page.fill("#id_password", "pass-for-tests-1")
    page.click("button[type=submit]")
    page.goto("/settings/tokens/")
    page.click("#sidebar a:text('Invite')")  # the sidebar's way to the invitation links
    page.fill("#id_note", "for Nina")
    page.click("button:text('Make link')")
    link = page.input_value("#new-invitation")
    page.click("button[data-copy]")
    page.wait_for_selector("button[data-copy]:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == link
    assert errors == []

    guest = chromium.new_context().new_page()
    guest.goto(link)
    guest.fill("#id_username", "nina")
    guest.fill("#id_password1", "a-long-pass-9")
    guest.fill("#id_password2", "a-long-pass-9")
    guest.click("button[type=submit]")
    guest.wait_for_url(f"{live_server.url}/")
    context.close()
    assert in_a_thread(lambda: User.objects.filter(username="nina").exists())


def in_a_thread(query):
    """Run an ORM query in a thread of its own: in this one Playwright's event loop would give it
    a connection of that loop's context, which nothing closes before the database is dropped."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def body():
        try:
            return query()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(body).result()
