"""Search on whichever database the suite runs on (SQLite FTS5 embedded, PostgreSQL in CI)."""

import pytest

from chats import search, search_sql, services
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def garden(user):
    chat = services.create_chat(owner=user, title="Garden notes", description="vegetables and flowers")
    services.send_message(chat=chat, content="The tomatoes need more sun this year.")
    services.send_message(chat=chat, content="Tomatoes, tomatoes everywhere: tomato soup tonight.",
                          new_thread_title="Kitchen")
    services.send_message(chat=chat, content="Water the roses on Sunday.")
    return chat


def test_messages_are_found_across_chats_ranked_with_snippets_and_ids(user, garden):
    other = services.create_chat(owner=user, title="Shopping")
    services.send_message(chat=other, content="buy tomatoes and basil")
    hits = search.search_messages(owner=user, query="tomatoes")
    assert len(hits) == 3
    assert hits[0].snippet.count("[[") >= 2  # the message that says it most ranks first
    assert "[[Tomatoes]]" in hits[0].snippet or "[[tomatoes]]" in hits[0].snippet
    by_chat = {h.chat_id for h in hits}
    assert by_chat == {str(garden.pk), str(other.pk)}
    kitchen = next(h for h in hits if h.thread_id is not None)
    assert kitchen.chat_title == "Garden notes" and kitchen.message_id


def test_every_word_must_match_as_a_prefix(user, garden):
    (hit,) = search.search_messages(owner=user, query="roses sunday")
    assert hit.snippet.startswith("Water the [[roses]] on [[Sunday]]")
    assert len(search.search_messages(owner=user, query="tomat")) == 2
    assert search.search_messages(owner=user, query="roses tomatoes") == []


def test_limit_and_offset(user, garden):
    for i in range(5):
        services.send_message(chat=garden, content=f"pepper number {i}")
    first = search.search_messages(owner=user, query="pepper", limit=2)
    second = search.search_messages(owner=user, query="pepper", limit=2, offset=2)
    assert len(first) == 2 and len(second) == 2
    assert not {h.message_id for h in first} & {h.message_id for h in second}
    with pytest.raises(InvalidInput) as err:
        search.search_messages(owner=user, query="pepper", limit=1000)
    assert "limit" in err.value.fields


def test_the_index_follows_edits_and_deletes(user, garden):
    message = services.send_message(chat=garden, content="cucumber salad")
    assert len(search.search_messages(owner=user, query="cucumber")) == 1
    services.edit_message(message=message, content="zucchini salad")
    assert search.search_messages(owner=user, query="cucumber") == []
    assert len(search.search_messages(owner=user, query="zucchini")) == 1
    message.delete()
    assert search.search_messages(owner=user, query="zucchini") == []


def test_deleted_chats_never_show(user, garden):
    services.delete_chat(chat=garden)
    assert search.search_messages(owner=user, query="tomatoes") == []
    assert search.search_chats(owner=user, query="garden") == []
    services.restore_chat(chat=garden)
    assert len(search.search_messages(owner=user, query="tomatoes")) == 2


def test_another_users_messages_never_show(user, other_user, garden):
    assert search.search_messages(owner=other_user, query="tomatoes") == []
    assert search.search_chats(owner=other_user, query="garden") == []


@pytest.mark.parametrize("query", [
    '"tomatoes', "tomatoes AND NOT", "tom* OR (", "-tomatoes", "NEAR(tomatoes sun)", "'; DROP TABLE x; --",
    "tomatoes:*&!|", "", "   ", "x" * 10_000, "🍅 tomatoes", None,
])
def test_odd_queries_give_results_or_nothing_never_an_error(user, garden, query):
    hits = search.search_messages(owner=user, query=query)
    assert isinstance(hits, list)
    assert isinstance(search.search_chats(owner=user, query=query), list)


def test_unicode_words_are_found(user):
    chat = services.create_chat(owner=user, title="Ünïcode")
    services.send_message(chat=chat, content="Привет мир, 東京 and naïve café")
    assert len(search.search_messages(owner=user, query="привет")) == 1
    assert len(search.search_messages(owner=user, query="café")) == 1
    assert len(search.search_chats(owner=user, query="ünïcode")) == 1


def test_chat_titles_and_descriptions(user, garden):
    assert [h.chat_id for h in search.search_chats(owner=user, query="vegetables")] == [str(garden.pk)]
    services.update_chat(chat=garden, title="Allotment")
    assert [h.chat_title for h in search.search_chats(owner=user, query="allotment")] == ["Allotment"]
    assert search.search_chats(owner=user, query="garden") == []


def test_shared_index_replaces_a_key_on_reindex(user, other_user):
    search.index_shared(owner=user, label="docs", key="a", content="the first version about llamas")
    search.index_shared(owner=user, label="docs", key="a", content="the second version about alpacas")
    search.index_shared(owner=user, label="other", key="b", content="llamas elsewhere")
    assert search.search_shared(owner=user, label="docs", query="llamas") == []
    assert [d["key"] for d in search.search_shared(owner=user, label="docs", query="alpacas")] == ["a"]
    assert search.search_shared(owner=other_user, label="docs", query="alpacas") == []
    with pytest.raises(InvalidInput):
        search.index_shared(owner=user, label="", key="k", content="x")


def lose_the_search_rows_of_one_message(message) -> None:
    """Drift as a bulk load with triggers off, or a restore of one table, would leave it."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("DELETE FROM chats_message_search WHERE message_id = %s", [message.pk])
        else:
            cursor.execute("INSERT INTO chats_message_fts(chats_message_fts, rowid, content) VALUES ('delete', %s, %s)",
                           [message.pk, message.content])
            cursor.execute("INSERT INTO chats_message_owner_fts(chats_message_owner_fts, rowid, body) "
                           "VALUES ('delete', %s, %s)", [message.pk, search_sql.owner_words(message.chat.owner_id,
                                                                                          message.content)])


def test_index_drift_is_reported_and_fixed(user, garden):
    assert search.index_drift() == []
    roses = garden.messages.get(content__startswith="Water the roses")
    lose_the_search_rows_of_one_message(roses)
    assert search.search_messages(owner=user, query="roses") == []

    problems = search.index_drift()
    assert problems and all(problem.startswith("chats_message") for problem in problems)
    assert search.index_drift(fix=True) == problems
    assert search.index_drift() == []
    assert [hit.message_id for hit in search.search_messages(owner=user, query="roses")] == [roses.pk]
    assert len(search.search_messages(owner=user, query="tomatoes")) == 2, "the other rows were kept"


def test_notes_are_searched_and_logs_are_not(user, garden):
    note = services.send_message(chat=garden, content="cucumbers in the greenhouse", kind="note")
    services.send_message(chat=garden, content="cucumbers counted by a tool", kind="log", subkind="tool")
    assert [h.message_id for h in search.search_messages(owner=user, query="cucumbers")] == [note.pk]
    assert search.index_drift() == []


def test_a_streaming_reply_is_found_by_its_settled_text_and_is_no_drift_meanwhile(user, garden):
    """PostgreSQL indexes a streaming reply as it starts and as it settles, not at every
    checkpoint; the drift check knows that, and the settled text is found."""
    reply = services.send_message(chat=garden, content="", status="streaming")
    services.save_reply_progress(message_id=reply.pk, content="Plant the carrots")
    assert search.index_drift() == []
    services.settle_reply(message=reply, status="final", content="Plant the carrots and the parsnips")
    (hit,) = search.search_messages(owner=user, query="parsnips")
    assert hit.message_id == reply.pk
    assert search.index_drift() == []
