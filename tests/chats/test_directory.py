"""The chat directory of a user: paging, search filter, trash, restore, purge, fork, export/import."""

from datetime import timedelta

import pytest
from django.utils import timezone

from chats import events, selectors, services
from chats.models import Chat, Message
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """Every event broadcast after commit, as (group, event)."""
    record = []
    monkeypatch.setattr(events, "relay", lambda group, batch: record.extend((group, event) for event in batch))
    return record


def test_directory_pages_newest_first_with_a_cursor_that_breaks_ties_by_id(user):
    same_time = timezone.now()
    chats = [services.create_chat(owner=user, title=f"c{i}") for i in range(7)]
    Chat.objects.filter(pk__in=[c.pk for c in chats[2:5]]).update(updated_at=same_time)
    seen, cursor = [], None
    while True:
        page = selectors.directory_page(user=user, limit=2, before=cursor)
        seen += [c.pk for c in page.chats]
        cursor = page.next_cursor
        if cursor is None:
            break
    expected = [c.pk for c in Chat.objects.filter(owner=user).order_by("-updated_at", "-id")]
    assert seen == expected and len(seen) == 7


def test_directory_search_filter_and_preview(user):
    plans = services.create_chat(owner=user, title="Holiday plans")
    services.create_chat(owner=user, title="Work")
    services.send_message(chat=plans, content="Book the ferry")
    page = selectors.directory_page(user=user, search="holiday")
    assert [c.title for c in page.chats] == ["Holiday plans"]
    assert page.chats[0].last_message_preview == "Book the ferry"


@pytest.mark.parametrize("kwargs, field", [
    ({"before": "yesterday"}, "before"),
    ({"before": "2026-01-01T00:00:00_not-a-uuid"}, "before"),
    ({"before": "2026-01-01T00:00:00_00000000-0000-0000-0000-000000000000"}, "before"),  # no time zone
    ({"limit": 1000}, "limit"),
    ({"limit": 0}, "limit"),
])
def test_bad_cursors_and_limits_name_the_field(user, kwargs, field):
    with pytest.raises(InvalidInput) as err:
        selectors.directory_page(user=user, **kwargs)
    assert field in err.value.fields


def test_directory_is_per_user(user, other_user):
    services.create_chat(owner=other_user, title="Theirs")
    assert selectors.directory_page(user=user).chats == []


@pytest.mark.django_db(transaction=True)  # events go out on commit
def test_create_rename_delete_restore_tell_the_users_tabs(user, sent):
    chat = services.create_chat(owner=user, title="Live")
    services.update_chat(chat=chat, title="Renamed")
    services.delete_chat(chat=chat)
    services.delete_chat(chat=chat)  # idempotent: no second event
    services.restore_chat(chat=chat)
    directory = [e["change"] for g, e in sent
                 if g == events.user_group(user.pk) and e["type"] == "directory.updated"]
    assert directory == ["created", "renamed", "deleted", "restored"]
    assert [e["type"] for g, e in sent if g == events.chat_group(chat.pk)] == ["chat.updated", "chat.deleted"]


@pytest.mark.django_db(transaction=True)
def test_a_new_message_moves_the_chat_and_tells_the_directory(user, sent):
    chat = services.create_chat(owner=user, title="Busy")
    sent.clear()
    services.send_message(chat=chat, content="news")
    changes = [e for g, e in sent if e["type"] == "directory.updated"]
    assert changes[0]["change"] == "touched" and changes[0]["chat"]["last_message_preview"] == "news"


def test_trash_lists_deleted_chats_and_restore_brings_members_back(user, make_agent):
    agent = make_agent(user, name="Keeper")
    chat = services.create_chat(owner=user, title="Binned", agents=[agent])
    services.send_message(chat=chat, content="kept")
    services.delete_chat(chat=chat)
    assert [c.pk for c in selectors.directory_page(user=user, trash=True).chats] == [chat.pk]
    assert chat.pk not in [c.pk for c in selectors.directory_page(user=user).chats]
    services.restore_chat(chat=chat)
    chat.refresh_from_db()
    assert chat.deleted_at is None and [m.agent for m in chat.memberships.all()] == [agent]
    assert chat.messages.get().content == "kept"


def test_restore_is_refused_after_the_trash_window_and_purge_removes_old_chats(user, settings):
    settings.HUB_TRASH_DAYS = 30
    old = services.create_chat(owner=user, title="Old")
    recent = services.create_chat(owner=user, title="Recent")
    services.send_message(chat=old, content="bye")
    for chat in (old, recent):
        services.delete_chat(chat=chat)
    Chat.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=31))
    old.refresh_from_db()
    with pytest.raises(InvalidInput):
        services.restore_chat(chat=old)
    assert services.purge_expired_chats() == 1
    assert not Chat.objects.filter(pk=old.pk).exists() and not Message.objects.filter(content="bye").exists()
    assert Chat.objects.filter(pk=recent.pk).exists()
    live = services.create_chat(owner=user, title="Live")
    with pytest.raises(InvalidInput):
        services.purge_chat(chat=live)


def test_fork_at_a_message_keeps_threads_and_members(user, make_agent):
    agent = make_agent(user, name="Forky")
    chat = services.create_chat(owner=user, title="Original", agents=[agent])
    services.send_message(chat=chat, content="one")
    two = services.send_message(chat=chat, content="two", new_thread_title="Side")
    services.send_message(chat=chat, content="note on side", thread=two.thread, kind="note")
    at = services.send_message(chat=chat, content="three", sender_agent=agent)
    services.send_message(chat=chat, content="after the fork point")
    fork = services.fork_chat(chat=chat, at_message=at)
    assert fork.forked_from == chat and fork.title == "Original (fork)"
    assert [m.content for m in fork.messages.order_by("id")] == ["one", "two", "note on side", "three"]
    side = fork.threads.get()
    assert side.title == "Side" and side.pk != two.thread_id
    assert [m.content for m in side.messages.order_by("id")] == ["two", "note on side"]
    assert [m.agent for m in fork.memberships.all()] == [agent]
    assert fork.messages.get(content="three").sender_agent == agent
    other = services.create_chat(owner=user, title="Elsewhere")
    with pytest.raises(InvalidInput):
        services.fork_chat(chat=other, at_message=at)


def _comparable(export: dict) -> dict:
    """An export without its ids, which differ between equal chats."""
    threads = {t["id"]: t["title"] for t in export["threads"]}
    index = {m["id"]: i for i, m in enumerate(export["messages"])}
    return {
        "chat": export["chat"],
        "members": [m["name"] for m in export["members"]],
        "threads": [{k: v for k, v in t.items() if k != "id"} for t in export["threads"]],
        "messages": [{**{k: v for k, v in m.items() if k not in ("id", "thread", "reply_to")},
                      "thread": threads.get(m["thread"]), "reply_to": index.get(m["reply_to"])}
                     for m in export["messages"]],
    }


def test_export_then_import_gives_an_equal_chat(user, make_agent):
    import json

    agent = make_agent(user, name="Porter")
    chat = services.create_chat(owner=user, title="Round trip", description="d", picture="🚢", agents=[agent])
    services.send_message(chat=chat, content="hello")
    reply = services.send_message(chat=chat, content="hi **there**", sender_agent=agent, new_thread_title="T")
    services.send_message(chat=chat, content="thinking", sender_agent=agent, kind="log", subkind="reasoning",
                          thread=reply.thread, reply_to=reply)
    services.send_message(chat=chat, content="a note", kind="note")
    exported = json.loads(json.dumps(services.export_chat(chat)))
    copy = services.import_chat(owner=user, data=exported)
    assert copy.pk != chat.pk
    assert _comparable(services.export_chat(copy)) == _comparable(exported)


def test_markdown_export_is_readable(user, make_agent):
    agent = make_agent(user, name="Scribe")
    chat = services.create_chat(owner=user, title="Minutes", agents=[agent])
    services.send_message(chat=chat, content="What's the plan?")
    services.send_message(chat=chat, content="Ship it.", sender_agent=agent)
    services.send_message(chat=chat, content="remember the deadline", kind="note")
    text = services.export_markdown(chat)
    assert text.startswith("# Minutes\n")
    assert "**You**" in text and "**Scribe**" in text and "Ship it." in text
    assert "> **Note**" in text


@pytest.mark.parametrize("data, field", [
    ({}, "format"),
    ({"format": "hub.chat", "version": 9}, "version"),
    ({"format": "hub.chat", "version": 1, "chat": {}, "members": [], "threads": [], "messages": "x"}, "messages"),
    ({"format": "hub.chat", "version": 1, "chat": {}, "members": [], "threads": [],
      "messages": [{"content": "x", "kind": "shout"}]}, "messages[0].kind"),
    ({"format": "hub.chat", "version": 1, "chat": {}, "members": [], "threads": [],
      "messages": [{"content": "x", "created_at": "soon"}]}, "messages[0].created_at"),
])
def test_bad_imports_name_the_field_and_write_nothing(user, data, field):
    with pytest.raises(InvalidInput) as err:
        services.import_chat(owner=user, data=data)
    assert field in err.value.fields
    assert not Chat.objects.filter(owner=user).exists()
