"""Staff only: an ordinary user gets no admin page at all; probes get a bare yes or no."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def admin_urls(run, chat, message):
    return [
        "/admin/", "/admin/login/", "/admin/health/", "/admin/repair/", "/admin/chats/chat/",
        f"/admin/chats/chat/{chat.pk}/change/", f"/admin/chats/message/{message.pk}/change/",
        "/admin/agents_app/run/", f"/admin/agents_app/run/{run.pk}/change/",
        f"/admin/agents_app/run/{run.pk}/timeline/", "/admin/agents_app/worker/", "/admin/admin/logentry/",
        "/admin/auth/user/", "/admin/password_change/", "/admin/no/such/page/",
    ]


def test_an_ordinary_user_gets_no_admin_page_at_all(client, user, asked):
    run = asked("hi")
    client.force_login(user)
    for url in admin_urls(run, run.chat, run.trigger_message):
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"Django" not in response.content and b"administration" not in response.content, url
    # Actions too: a POST is refused the same way and changes nothing.
    response = client.post(reverse("admin:agents_app_run_act", args=[run.pk, "cancel_runs"]))
    assert response.status_code == 404
    run.refresh_from_db()
    assert run.status == "queued"
    response = client.post("/admin/repair/", {"check": ["expired_leases"]})
    assert response.status_code == 404


def test_a_visitor_is_sent_to_the_site_login_and_comes_back(client, staff):
    response = client.get("/admin/agents_app/run/?status__exact=failed")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/admin/agents_app/run/%3Fstatus__exact%3Dfailed"
    # The admin's own log-in form is not shown either; its `next` is handed on.
    response = client.get("/admin/login/?next=/admin/health/")
    assert response["Location"] == "/login/?next=/admin/health/"
    response = client.post("/login/?next=/admin/health/", {"username": "support", "password": "pass-for-tests-1"})
    assert response.status_code == 302 and response["Location"] == "/admin/health/"
    assert client.get("/admin/health/").status_code == 200


def test_staff_see_every_page(staff_client, asked):
    run = asked("hi")
    for url in admin_urls(run, run.chat, run.trigger_message)[:-1]:
        if url == "/admin/login/":
            continue  # a logged-in staff member is sent on to the index
        assert staff_client.get(url).status_code == 200, url


def test_healthz_says_ok_and_nothing_else(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"
    assert response["Content-Type"].startswith("text/plain")
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    assert client.head("/healthz").status_code == 200
    assert client.post("/healthz").status_code == 405


@pytest.mark.needs_redis
def test_healthz_says_unavailable_when_redis_does_not_answer(client, settings):
    import socket

    from hub.redis_config import RedisConfig

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/2"
    settings.HUB_REDIS = RedisConfig(settings.REDIS_URL)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.content == b"unavailable\n"
