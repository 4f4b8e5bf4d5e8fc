from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from chats import selectors, services
from chats.models import Message, Thread
from hub.errors import NotFound

pytestmark = pytest.mark.django_db


def test_chat_for_user_hides_other_users_deleted_and_malformed(chat, other_user, user):
    assert selectors.chat_for_user(user=user, chat_id=chat.pk) == chat
    unknown = str(chat.pk)[:-1] + ("1" if str(chat.pk).endswith("0") else "0")  # always another id
    for bad in [unknown, "not-a-uuid", None, 12]:
        with pytest.raises(NotFound):
            selectors.chat_for_user(user=user, chat_id=bad)
    with pytest.raises(NotFound):
        selectors.chat_for_user(user=other_user, chat_id=chat.pk)
    services.delete_chat(chat=chat)
    with pytest.raises(NotFound):
        selectors.chat_for_user(user=user, chat_id=chat.pk)


def test_two_users_see_only_their_own_chats(user, other_user):
    mine = services.create_chat(owner=user, title="mine")
    theirs = services.create_chat(owner=other_user, title="theirs")
    assert list(selectors.chats_for_user(user=user)) == [mine]
    assert list(selectors.chats_for_user(user=other_user)) == [theirs]


def test_chats_list_newest_first(user):
    a = services.create_chat(owner=user, title="a")
    b = services.create_chat(owner=user, title="b")
    services.send_message(chat=a, content="bump")
    assert [c.title for c in selectors.chats_for_user(user=user)] == ["a", "b"]
    services.send_message(chat=b, content="bump")
    assert [c.title for c in selectors.chats_for_user(user=user)][0] == "b"


def test_chat_view_pages_by_id(chat, settings):
    settings.MESSAGE_PAGE_SIZE = 5
    sent = [services.send_message(chat=chat, content=f"m{i}") for i in range(12)]
    view = selectors.chat_view(chat=chat)
    assert [m.content for m in view.messages] == [f"m{i}" for i in range(7, 12)]
    assert view.has_more is True
    older = selectors.chat_view(chat=chat, before_id=view.oldest_id)
    assert [m.content for m in older.messages] == [f"m{i}" for i in range(2, 7)]
    oldest = selectors.chat_view(chat=chat, before_id=older.oldest_id)
    assert [m.content for m in oldest.messages] == ["m0", "m1"]
    assert oldest.has_more is False
    caught_up, more = selectors.message_page(chat=chat, after_id=sent[8].pk)
    assert [m.content for m in caught_up] == ["m9", "m10", "m11"] and more is False


def test_paging_is_by_id_not_time(chat):
    first = services.send_message(chat=chat, content="first")
    second = services.send_message(chat=chat, content="second")
    # Clocks can go backwards; the id order is the truth.
    Message.objects.filter(pk=second.pk).update(created_at=first.created_at - timedelta(hours=1))
    view = selectors.chat_view(chat=chat)
    assert [m.content for m in view.messages] == ["first", "second"]


def test_thread_grouping_keeps_notes_and_resources_apart(chat, make_agent, user):
    agent = make_agent(user)
    services.send_message(chat=chat, content="default hello")
    trip = services.send_message(chat=chat, content="trip plan", new_thread_title="Trip").thread
    services.send_message(chat=chat, content="a note", thread=trip, kind="note")
    services.send_message(chat=chat, content="docs", thread=trip, kind="resource", subkind="remote")
    services.send_message(chat=chat, content="reply", thread=trip, sender_agent=agent)
    services.send_message(chat=chat, content="thinking", thread=trip, sender_agent=agent, kind="log",
                          subkind="reasoning")

    view = selectors.chat_view(chat=chat)
    default, trip_view = view.threads
    assert default.thread is None and [m.content for m in default.messages] == ["default hello"]
    assert trip_view.title == "Trip"
    assert [m.content for m in trip_view.messages] == ["trip plan", "reply", "thinking"]
    assert [m.content for m in trip_view.notes] == ["a note"]
    assert [m.content for m in trip_view.resources] == ["docs"]


def test_current_thread_is_the_most_recently_active(chat):
    services.send_message(chat=chat, content="a", new_thread_title="A")
    b = services.send_message(chat=chat, content="b", new_thread_title="B").thread
    assert selectors.chat_view(chat=chat).current_thread.thread == b
    services.send_message(chat=chat, content="default again")
    assert selectors.chat_view(chat=chat).current_thread.thread is None
    a = Thread.objects.get(title="A")
    services.send_message(chat=chat, content="a again", thread=a)
    assert selectors.chat_view(chat=chat).current_thread.thread == a


def test_current_thread_counts_activity_beyond_the_page(chat, settings):
    settings.MESSAGE_PAGE_SIZE = 2
    old = services.send_message(chat=chat, content="old thread", new_thread_title="Old").thread
    services.send_message(chat=chat, content="x")
    services.send_message(chat=chat, content="y")
    Thread.objects.filter(pk=old.pk).update(last_activity_at=timezone.now() + timedelta(minutes=1))
    assert selectors.chat_view(chat=chat).current_thread.thread == old


def test_empty_chat_has_no_current_thread(chat):
    view = selectors.chat_view(chat=chat)
    assert view.messages == [] and view.current_thread is None and view.has_more is False


def test_dump_shows_the_whole_structure(chat, capsys):
    services.send_message(chat=chat, content="hello there")
    services.send_message(chat=chat, content="noted", new_thread_title="Side", kind="note")
    text = selectors.chat_view(chat=chat).dump()
    assert "Plans" in text and "hello there" in text and "'Side'" in text and "notes: 1" in text
    call_command("chat_dump", str(chat.pk))
    assert "hello there" in capsys.readouterr().out


def test_message_for_chat_refuses_another_chats_message(chat, user):
    other = services.create_chat(owner=user, title="o")
    message = services.send_message(chat=other, content="x")
    with pytest.raises(NotFound):
        selectors.message_for_chat(chat=chat, message_id=message.pk)
