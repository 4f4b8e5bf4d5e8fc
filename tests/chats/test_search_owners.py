"""A user's message search reads that user's messages only, on either database: PostgreSQL's
table partitioned by owner, SQLite's index of owner-tagged words (chats/search_sql.py)."""

import importlib
from types import SimpleNamespace

import pytest
from django.db import connection

from chats import search, search_sql, services
from chats.models import Message

pytestmark = pytest.mark.django_db

WORDS = ["tomatoes in the greenhouse", "tomato soup tonight", "basil and tomatoes", "roses on Sunday"]


@pytest.fixture
def users(django_user_model):
    """Twelve users, so that some ids begin with the digits of another's (1 and 10, 11, 12)."""
    return [django_user_model.objects.create_user(f"gardener{n}") for n in range(12)]


def write_the_same_words(users) -> dict[int, set[int]]:
    """Each user writes the same messages in two chats; {user id: their message ids}."""
    mine = {}
    for user in users:
        ids = set()
        for title in ("Garden", "Kitchen"):
            chat = services.create_chat(owner=user, title=title)
            ids |= {services.send_message(chat=chat, content=text).pk for text in WORDS}
        mine[user.pk] = ids
    return mine


@pytest.mark.parametrize("query, per_chat", [("tomatoes", 2), ("tomat", 3), ("tomatoes basil", 1), ("sunday", 1)])
def test_each_user_finds_their_own_messages_and_no_one_elses(users, query, per_chat):
    mine = write_the_same_words(users)
    for user in users:
        found = {hit.message_id for hit in search.search_messages(owner=user, query=query, limit=100)}
        assert found <= mine[user.pk], f"{user} saw another user's messages"
        assert len(found) == 2 * per_chat


def test_a_word_that_looks_like_anothers_tag_stays_with_its_writer(users):
    alice, bob = users[0], users[10]
    services.send_message(chat=services.create_chat(owner=bob, title="x"),
                          content=f"{search_sql.owner_tag(alice.pk)}secret u{alice.pk} secret")
    assert search.search_messages(owner=alice, query="secret") == []
    assert len(search.search_messages(owner=bob, query="secret")) == 1
    assert len(search.search_messages(owner=bob, query=search_sql.owner_tag(alice.pk))) == 1


def test_an_edit_and_a_delete_change_the_writers_hits_only(users):
    mine = write_the_same_words(users[:2])
    alice, bob = users[:2]
    message = services.send_message(chat=services.create_chat(owner=alice, title="Salad"), content="cucumber salad")
    services.send_message(chat=services.create_chat(owner=bob, title="Salad"), content="cucumber salad")

    services.edit_message(message=message, content="zucchini salad")
    assert search.search_messages(owner=alice, query="cucumber") == []
    assert [hit.message_id for hit in search.search_messages(owner=alice, query="zucchini")] == [message.pk]
    assert search.search_messages(owner=bob, query="zucchini") == []
    assert len(search.search_messages(owner=bob, query="cucumber")) == 1

    message.delete()
    assert search.search_messages(owner=alice, query="zucchini") == []
    assert len(search.search_messages(owner=bob, query="cucumber")) == 1
    tomatoes = search.search_messages(owner=alice, query="tomatoes", limit=100)
    assert {hit.message_id for hit in tomatoes} <= mine[alice.pk]
    assert search.index_drift() == []


def test_a_chat_deleted_for_good_leaves_no_search_rows(user, other_user):
    chat = services.create_chat(owner=user, title="Short-lived")
    services.send_message(chat=chat, content="ephemeral words")
    services.send_message(chat=services.create_chat(owner=other_user, title="Kept"), content="ephemeral words")
    chat.delete()
    assert search.search_messages(owner=user, query="ephemeral") == []
    assert len(search.search_messages(owner=other_user, query="ephemeral")) == 1
    assert search.index_drift() == []


@pytest.mark.django_db(transaction=True)
def test_a_fresh_connection_indexes_and_searches(user):
    connection.close()  # the next query opens a new connection, which must get the index's function
    chat = services.create_chat(owner=user, title="Again")
    message = services.send_message(chat=chat, content="persimmon")
    assert [hit.message_id for hit in search.search_messages(owner=user, query="persimmon")] == [message.pk]


@pytest.mark.sqlite_only
def test_snippets_and_order_are_the_global_indexs(user):
    """The owner index gives the page; its snippets are the ones the index of every message cuts."""
    chat = services.create_chat(owner=user, title="Long")
    filler = " ".join(f"word{n}" for n in range(40))
    texts = [f"{filler} the tomatoes ripen. {filler} Tomatoes again!", "Tomatoes, tomatoes everywhere: tomato soup.",
             f"Naïve café owners grow tomatoes_and_basil {filler}", "tomatoes"]
    for text in texts:
        services.send_message(chat=chat, content=text)
    for query in ("tomatoes", "tomat", "café tomat", "basil"):
        hits = search.search_messages(owner=user, query=query)
        with connection.cursor() as cursor:
            cursor.execute("SELECT rowid, snippet(chats_message_fts, 0, '[[', ']]', '…', 20) FROM chats_message_fts "
                           "WHERE chats_message_fts MATCH %s", [search._fts_query(search.terms_of(query), "sqlite")])
            expected = {mid: search.tidy(text) for mid, text in cursor.fetchall()}
        assert {hit.message_id: hit.snippet for hit in hits} == expected
        assert all("u" + str(user.pk) + "x" not in hit.snippet for hit in hits)
        assert [hit.rank for hit in hits] == sorted((hit.rank for hit in hits), reverse=True)


@pytest.mark.sqlite_only
def test_the_migration_builds_the_owner_index_from_the_stored_messages(users):
    write_the_same_words(users[:3])
    with connection.cursor() as cursor:
        for statement in search_sql.SQLITE_OWNER_INDEX_REVERSE:  # as before the migration
            cursor.execute(statement)
        migration = importlib.import_module("chats.migrations.0009_sqlite_search_per_owner")
        migration.build(None, SimpleNamespace(connection=connection, execute=cursor.execute))
    for user in users[:3]:
        expected = {m.pk for m in Message.objects.filter(chat__owner=user, content__icontains="tomat")}
        assert {hit.message_id for hit in search.search_messages(owner=user, query="tomat", limit=100)} == expected
        assert len(expected) == 6
    assert search.index_drift() == []
    later = services.send_message(chat=services.create_chat(owner=users[0], title="New"), content="tomatoes later")
    assert later.pk in {hit.message_id for hit in search.search_messages(owner=users[0], query="tomatoes", limit=100)}


@pytest.mark.sqlite_only
def test_a_user_search_reads_the_owner_index(user):
    """The query plan: a MATCH on the owner index, not on the index of every message."""
    services.send_message(chat=services.create_chat(owner=user, title="Plan"), content="tomatoes")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + search.MESSAGE_SQL["sqlite"], {
            "owner_q": search._owner_fts_query(["tomatoes"], user.pk), "owner": user.pk, "exclude_json": "[]",
            "agent": -1, "limit": 20, "offset": 0,
        })
        plan = " | ".join(row[-1] for row in cursor.fetchall())
    assert "chats_message_owner_fts VIRTUAL TABLE INDEX" in plan
    assert "chats_message_fts " not in plan
