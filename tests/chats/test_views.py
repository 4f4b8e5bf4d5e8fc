import json
import re

import pytest
from django.urls import reverse

from chats import services
from chats.models import Chat

pytestmark = pytest.mark.django_db


def test_login_page_serves(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"Log in to Hub" in response.content


def test_pages_need_login(client, chat):
    for url in [reverse("chats:list"), reverse("chats:detail", args=[chat.pk])]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_signup_logs_in_and_shows_the_empty_list(client, settings):
    settings.HUB_ALLOW_SIGNUP = True
    response = client.post(
        reverse("signup"), {"username": "newbie", "password1": "a-long-pass-9", "password2": "a-long-pass-9"}
    )
    assert response.status_code == 302
    page = client.get(reverse("chats:list"))
    assert b"No chats yet" in page.content


def test_signup_says_which_field_is_wrong(client, settings):
    settings.HUB_ALLOW_SIGNUP = True
    response = client.post(reverse("signup"), {"username": "x", "password1": "a", "password2": "b"})
    assert response.status_code == 400
    assert b"id_password2-error" in response.content


def test_signup_is_by_invitation_once_the_hub_has_an_account(client, settings, user):
    settings.HUB_ALLOW_SIGNUP = False
    response = client.get(reverse("signup"))
    assert response.status_code == 403 and b"Sign-up is by invitation" in response.content


def test_create_chat_from_the_list(client, user):
    client.force_login(user)
    response = client.post(reverse("chats:create"), {"title": "From the page", "description": "", "picture": ""})
    chat = Chat.objects.get(owner=user, title="From the page")
    assert response.status_code == 302 and response["Location"] == reverse("chats:detail", args=[chat.pk])


def test_create_chat_with_a_bad_title_says_so(client, user):
    client.force_login(user)
    response = client.post(reverse("chats:create"), {"title": "x" * 300})
    assert response.status_code == 400
    assert b"id_title-error" in response.content
    assert not Chat.objects.exists()


def test_chat_page_shows_messages_and_paging(client, user, chat, settings):
    settings.MESSAGE_PAGE_SIZE = 2
    for text in ["one", "two", "three"]:
        services.send_message(chat=chat, content=text)
    client.force_login(user)
    page = client.get(reverse("chats:detail", args=[chat.pk]))
    assert page.status_code == 200
    # The page embeds the open chat's newest page (the script renders it) and says more exist.
    embedded = re.search(rb'id="hub-initial" type="application/json">(.*?)</script>', page.content).group(1)
    opened = json.loads(embedded)["open"]
    assert [m["content"] for m in opened["page"]["messages"]] == ["two", "three"] and opened["page"]["has_more"]
    older = client.get(reverse("chats:messages", args=[chat.pk]), {"before": chat.messages.order_by("id")[1].pk})
    assert [m["content"] for m in older.json()["messages"]] == ["one"]


def test_another_users_chat_is_not_found(client, other_user, chat):
    client.force_login(other_user)
    assert client.get(reverse("chats:detail", args=[chat.pk])).status_code == 404
    assert client.get(reverse("chats:messages", args=[chat.pk])).status_code == 404
    assert client.get(reverse("chats:detail", args=["garbage"])).status_code == 404


def test_message_pages_refuse_bad_cursors(client, user, chat):
    client.force_login(user)
    response = client.get(reverse("chats:messages", args=[chat.pk]), {"before": "abc"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"


def test_admin_is_for_staff_only(client, user, admin_client):
    assert admin_client.get("/admin/chats/chat/").status_code == 200
    assert admin_client.get("/admin/agents_app/run/").status_code == 200
    client.force_login(user)
    assert client.get("/admin/chats/chat/").status_code == 404  # no admin page at all (tests/admin)


def test_every_model_is_in_the_admin(admin_client):
    from django.apps import apps
    from django.contrib import admin

    for app_label in ("chats", "agents_app"):
        for model in apps.get_app_config(app_label).get_models():
            assert admin.site.is_registered(model), model
            url = f"/admin/{app_label}/{model._meta.model_name}/"
            assert admin_client.get(url).status_code == 200, url


def test_memory_page_shows_entries_with_their_chat_and_forgets_one(client, user, other_user):
    from chats import memory

    chat = services.create_chat(owner=user, title="Where I said it")
    memory.append(owner=user, text="likes green tea", chat=chat)
    block = memory.append(owner=user, text="lives in Lyon")
    client.force_login(user)
    page = client.get(reverse("chats:memory"))
    assert page.status_code == 200
    assert b"likes green tea" in page.content and reverse("chats:detail", args=[chat.pk]).encode() in page.content
    entry = block.entries.get(content="lives in Lyon")
    client.force_login(other_user)
    assert client.post(reverse("chats:memory_entry_delete", args=[entry.pk])).status_code == 404
    client.force_login(user)
    client.post(reverse("chats:memory_entry_delete", args=[entry.pk]))
    assert memory.get_block(owner=user, label="memory").content == "likes green tea"


def test_memory_page_writes_a_block_and_names_a_bad_field(client, user):
    from chats import memory

    client.force_login(user)
    response = client.post(reverse("chats:memory"), {"label": "prefs", "max_tokens": 100, "content": "metric"})
    assert response.status_code == 302
    assert memory.get_block(owner=user, label="prefs").content == "metric"
    response = client.post(reverse("chats:memory"), {"label": "", "max_tokens": 0, "content": "x"})
    assert response.status_code == 400 and b"id_label-error" in response.content
