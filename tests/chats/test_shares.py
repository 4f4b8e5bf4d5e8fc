"""Share links: the snapshot a link holds, revoking, the owner's lists, the chat page's Share
dialog endpoints and the Shared links page."""

import json

import pytest
from django.urls import reverse

from chats import events, memory, selectors, services
from chats.models import ShareLink
from chats.services.shares import MAX_SHARED_MESSAGES, OWNER_NAME
from hub.errors import Conflict, InvalidInput, NotFound

pytestmark = pytest.mark.django_db


def messages_of(link):
    return [m for thread in link.snapshot["threads"] for m in thread["messages"]]


def test_a_snapshot_holds_the_conversation_by_thread_and_nothing_else(user, make_agent):
    agent = make_agent(user, name="Sage", avatar="🦉")
    chat = services.create_chat(owner=user, title="Trip", agents=[agent])
    services.send_message(chat=chat, content="Where to go?")
    services.send_message(chat=chat, content="**Lisbon**", sender_agent=agent)
    services.send_message(chat=chat, content="thinking about it", sender_agent=agent, kind="log", subkind="reasoning")
    services.send_message(chat=chat, content="private reminder", kind="note")
    services.send_message(chat=chat, content="And food?", new_thread_title="Food")
    memory.append(owner=user, text="Allergic to nuts")

    link = services.share_chat(chat=chat)

    assert link.title == "Trip" and link.token and len(link.token) >= 40 and link.revoked_at is None
    threads = link.snapshot["threads"]
    assert [t["title"] for t in threads] == ["Main thread", "Food"]
    main = threads[0]["messages"]
    assert [(m["sender"]["name"], m["content"]) for m in main] == [(OWNER_NAME, "Where to go?"), ("Sage", "**Lisbon**")]
    assert main[1]["sender"] == {"type": "agent", "name": "Sage", "avatar": "🦉"}
    assert main[1]["format"] == "markdown" and main[1]["status"] == "final" and main[1]["created_at"]
    dumped = json.dumps(link.snapshot)
    for left_out in ("thinking about it", "private reminder", "Allergic to nuts", user.username, str(chat.pk)):
        assert left_out not in dumped
    assert link.snapshot["memory"] == []


def test_notes_and_memory_only_when_chosen(user):
    chat = services.create_chat(owner=user, title="Plans")
    services.send_message(chat=chat, content="Said aloud")
    services.send_message(chat=chat, content="Only a note", kind="note")
    memory.append(owner=user, text="Likes trains")

    plain = services.share_chat(chat=chat)
    with_notes = services.share_chat(chat=chat, include_notes=True)
    with_memory = services.share_chat(chat=chat, include_memory=True)

    assert [m["content"] for m in messages_of(plain)] == ["Said aloud"]
    assert [(m["kind"], m["content"]) for m in messages_of(with_notes)] == [
        ("message", "Said aloud"), ("note", "Only a note")]
    assert with_notes.include_notes and not with_notes.include_memory and with_notes.snapshot["memory"] == []
    assert with_memory.snapshot["memory"] == [{"label": "memory", "content": "Likes trains"}]
    assert "Only a note" not in json.dumps(with_memory.snapshot)


def test_files_are_named_never_reachable_and_image_avatars_stay_home(user, make_agent):
    agent = make_agent(user, name="Pic", avatar="https://tracker.example/a.png")
    chat = services.create_chat(owner=user, title="Files", agents=[agent], picture="https://tracker.example/c.png")
    services.send_message(chat=chat, content="see file", data={"files": [
        {"id": "0b7e", "name": "report.pdf", "size": 1234, "url": "/files/0b7e/", "chat_id": str(chat.pk)}]})
    services.send_message(chat=chat, content="ok", sender_agent=agent)

    link = services.share_chat(chat=chat)

    first, second = messages_of(link)
    assert first["files"] == [{"name": "report.pdf", "size": 1234}]
    assert second["sender"]["avatar"] == "" and link.snapshot["picture"] == ""
    dumped = json.dumps(link.snapshot)
    assert "/files/" not in dumped and "tracker.example" not in dumped and "0b7e" not in dumped


def test_later_edits_and_deletions_never_reach_the_snapshot(user):
    chat = services.create_chat(owner=user, title="Fixed")
    message = services.send_message(chat=chat, content="Original words")
    link = services.share_chat(chat=chat)

    services.edit_message(message=message, content="Rewritten words")
    message.delete()
    services.send_message(chat=chat, content="Said after sharing")
    services.update_chat(chat=chat, title="Renamed later")

    link.refresh_from_db()
    assert [m["content"] for m in messages_of(link)] == ["Original words"] and link.snapshot["title"] == "Fixed"


def test_a_temporary_or_deleted_chat_cannot_be_shared(user):
    temporary = services.create_chat(owner=user, title="Passing", temporary=True)
    with pytest.raises(Conflict, match="save it first"):
        services.share_chat(chat=temporary)
    deleted = services.create_chat(owner=user, title="Gone")
    services.delete_chat(chat=deleted)
    with pytest.raises(InvalidInput, match="deleted"):
        services.share_chat(chat=deleted)
    assert not ShareLink.objects.exists()


@pytest.mark.parametrize("field", ["include_notes", "include_memory"])
def test_a_flag_that_is_not_a_boolean_names_its_field(chat, field):
    with pytest.raises(InvalidInput) as caught:
        services.share_chat(chat=chat, **{field: "yes"})
    assert list(caught.value.fields) == [field]
    assert not ShareLink.objects.exists()


def test_a_chat_too_long_to_share_is_refused_with_a_clear_error(chat, monkeypatch):
    monkeypatch.setattr("chats.services.shares.MAX_SHARED_MESSAGES", 2)
    for word in ("one", "two", "three"):
        services.send_message(chat=chat, content=word)
    with pytest.raises(InvalidInput, match="at most 2 messages"):
        services.share_chat(chat=chat)
    assert MAX_SHARED_MESSAGES >= 1000


def test_a_live_link_is_found_by_its_token_until_revoked_trashed_or_purged(chat):
    services.send_message(chat=chat, content="hi")
    link = services.share_chat(chat=chat)
    assert selectors.live_share_by_token(link.token).pk == link.pk
    for guess in ("", "x", link.token[:-1], link.token + "x", "a" * 5000, "../" + link.token):
        assert selectors.live_share_by_token(guess) is None

    services.delete_chat(chat=chat)
    assert selectors.live_share_by_token(link.token) is None
    services.restore_chat(chat=chat)
    assert selectors.live_share_by_token(link.token) is not None

    services.revoke_share(link=link)
    services.revoke_share(link=link)  # again: nothing changes
    assert selectors.live_share_by_token(link.token) is None
    kept = services.share_chat(chat=chat)
    services.delete_chat(chat=chat)
    services.purge_chat(chat=chat)
    assert selectors.live_share_by_token(kept.token) is None and not ShareLink.objects.exists()


def test_share_events_go_to_the_owners_tabs(user, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(events, "relay", lambda group, batch: sent.extend((group, event) for event in batch))
    chat = services.create_chat(owner=user, title="Told")
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        link = services.share_chat(chat=chat)
    with django_capture_on_commit_callbacks(execute=True):
        services.revoke_share(link=link)
        services.revoke_share(link=link)
    shared = [(group, json.loads(json.dumps(event))) for group, event in sent if event["type"] == "share.updated"]
    assert [(group, event["change"]) for group, event in shared] == [
        (events.user_group(user.pk), "created"), (events.user_group(user.pk), "revoked")]
    payload = shared[0][1]["share"]
    assert payload["url"] == f"/s/{link.token}/" and payload["chat_id"] == str(chat.pk) and "snapshot" not in payload


def test_the_owners_lists_page_and_leave_out_revoked_and_trashed(user, other_user):
    first = services.create_chat(owner=user, title="First")
    second = services.create_chat(owner=user, title="Second")
    trashed = services.create_chat(owner=user, title="Trashed")
    links = [services.share_chat(chat=first) for _ in range(3)] + [services.share_chat(chat=second)]
    services.share_chat(chat=trashed)
    services.delete_chat(chat=trashed)
    services.revoke_share(link=links[0])
    services.share_chat(chat=services.create_chat(owner=other_user, title="Theirs"))

    page, more = selectors.shares_of_user(user=user, limit=2)
    assert [link.pk for link in page] == [links[3].pk, links[2].pk] and more
    rest, more = selectors.shares_of_user(user=user, limit=2, before=page[-1].pk)
    assert [link.pk for link in rest] == [links[1].pk] and not more
    of_first, _ = selectors.shares_of_user(user=user, chat=first)
    assert [link.pk for link in of_first] == [links[2].pk, links[1].pk]
    with pytest.raises(NotFound):
        selectors.share_for_user(user=other_user, share_id=links[1].pk)
    for bad in ("x", -1, 2**70, None):
        with pytest.raises(NotFound):
            selectors.share_for_user(user=user, share_id=bad)


# --- The chat page's Share dialog and the Shared links page -----------------------------------------

def post_json(client, url, body=None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def test_the_share_dialog_makes_lists_and_revokes(client, user, other_user):
    chat = services.create_chat(owner=user, title="Dialog")
    services.send_message(chat=chat, content="hello")
    client.force_login(user)

    made = post_json(client, f"/chats/{chat.pk}/shares/", {"include_notes": True})
    assert made.status_code == 201, made.content
    share = made.json()["share"]
    assert share["include_notes"] and not share["include_memory"] and share["url"].startswith("/s/")
    listed = client.get(f"/chats/{chat.pk}/shares/").json()
    assert [s["id"] for s in listed["results"]] == [share["id"]] and listed["next_cursor"] is None

    bad = post_json(client, f"/chats/{chat.pk}/shares/", {"include_memory": "sure"})
    assert bad.status_code == 400 and bad.json()["error"]["fields"] == {"include_memory": ["must be true or false"]}

    client.force_login(other_user)
    assert post_json(client, f"/chats/{chat.pk}/shares/").status_code == 404
    assert client.get(f"/chats/{chat.pk}/shares/").status_code == 404
    assert post_json(client, f"/shares/{share['id']}/revoke/").status_code == 404
    assert ShareLink.objects.get(pk=share["id"]).revoked_at is None

    client.force_login(user)
    revoked = post_json(client, f"/shares/{share['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["share"]["revoked_at"]
    assert client.get(f"/chats/{chat.pk}/shares/").json()["results"] == []
    assert client.get(share["url"]).status_code == 404


def test_a_temporary_chat_says_to_save_it_first(client, user):
    chat = services.create_chat(owner=user, title="Passing", temporary=True)
    client.force_login(user)
    refused = post_json(client, f"/chats/{chat.pk}/shares/")
    assert refused.status_code == 409 and "save it first" in refused.json()["error"]["message"]
    assert client.get(f"/chats/{chat.pk}/shares/").json() == {"results": [], "next_cursor": None}


def test_the_shared_links_page_lists_opens_and_revokes(client, user, other_user, django_assert_max_num_queries):
    chats = [services.create_chat(owner=user, title=f"Chat {n}") for n in range(3)]
    links = [services.share_chat(chat=chat) for chat in chats]
    services.share_chat(chat=services.create_chat(owner=other_user, title="Not mine"))
    client.force_login(user)

    with django_assert_max_num_queries(8):
        page = client.get(reverse("chats:shared_links"))
    html = page.content.decode()
    assert page.status_code == 200
    assert all(f"Chat {n}" in html and f"/s/{links[n].token}/" in html for n in range(3))
    assert "Not mine" not in html

    gone = client.post(reverse("chats:share_revoke", args=[links[1].pk]), follow=True)
    assert "Revoked the link to “Chat 1”" in gone.content.decode()
    assert f"/s/{links[1].token}/" not in gone.content.decode()
    assert client.post(reverse("chats:share_revoke", args=[10**6])).status_code == 404

    client.force_login(other_user)
    assert client.post(reverse("chats:share_revoke", args=[links[0].pk])).status_code == 404
    empty = client.get(reverse("chats:shared_links")).content.decode()
    assert "Chat 0" not in empty and "Not mine" in empty


def test_the_shared_links_page_pages_and_says_when_empty(client, user, settings, monkeypatch):
    monkeypatch.setattr("chats.views.shares.PAGE_SIZE", 2)
    client.force_login(user)
    assert "You are not sharing any chat" in client.get("/shares/").content.decode()
    chat = services.create_chat(owner=user, title="Paged")
    links = [services.share_chat(chat=chat) for _ in range(3)]
    first = client.get("/shares/").content.decode()
    assert f"?before={links[1].pk}" in first and links[0].token not in first
    older = client.get(f"/shares/?before={links[1].pk}").content.decode()
    assert links[0].token in older and links[2].token not in older and "Back to the newest links" in older
    assert client.get("/shares/?before=nonsense").status_code == 302


def test_the_sidebar_links_to_the_shared_links_page(client, user):
    client.force_login(user)
    assert 'href="/shares/"' in client.get("/memory/").content.decode()
