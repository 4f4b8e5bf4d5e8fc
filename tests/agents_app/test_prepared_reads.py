"""The reads of a turn's start and end whose SQL is built once (hub.prepared): they give what their
querysets give, see each new write, and stop paying for building SQL after the first turn."""

from unittest import mock

import pytest
from django.db import connection, transaction
from django.db.models.sql.compiler import SQLCompiler
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents_app.models import Run
from agents_app.turns.execution import RUN_WITH_ITS_PARTS, load_run
from chats import delivery, memory, selectors, services
from chats.models import Chat, Message
from chats.services.replies import REPLY_TO_SETTLE
from hub.prepared import PreparedRead, _stand_in

pytestmark = pytest.mark.django_db(transaction=True)


def fields_of(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def test_a_run_read_by_its_id_comes_with_its_agent_chat_and_thread(scripted_agent, run_now):
    agent = scripted_agent(reply="Done.")
    chat = agent.main_chat
    in_main = services.send_message(chat=chat, content="In the main thread")
    in_thread = services.send_message(chat=chat, content="In a thread", new_thread_title="Side question")
    run_now()
    for trigger in (in_main, in_thread):
        run_id = Run.objects.get(trigger_message=trigger).pk
        expected = Run.objects.select_related("agent", "chat", "thread").get(pk=run_id)
        for value in (run_id, str(run_id)):  # Celery hands the task its id as text
            run = load_run(value)
            assert fields_of(run) == fields_of(expected)
            assert fields_of(run.agent) == fields_of(expected.agent)
            assert fields_of(run.chat) == fields_of(expected.chat)
            assert run.chat.title == chat.title and run.agent.name == agent.name
            assert run.status == "succeeded" and run.checkpoint == expected.checkpoint
            if trigger.thread is None:
                assert run.thread is None
            else:
                assert run.thread.title == "Side question" and fields_of(run.thread) == fields_of(expected.thread)


def test_a_run_that_is_not_there_is_the_models_does_not_exist():
    with pytest.raises(Run.DoesNotExist):
        load_run("00000000-0000-0000-0000-000000000000")


def test_thread_history_is_each_threads_own_messages_in_order(scripted_agent, run_now):
    agent = scripted_agent(reply="Answer to {message}")
    chat = agent.main_chat
    first = services.send_message(chat=chat, content="first")
    run_now()
    second = services.send_message(chat=chat, content="second")
    run_now()
    side = services.send_message(chat=chat, content="aside", new_thread_title="Aside")
    run_now()
    assert [m.content for m in selectors.thread_history(chat=chat, thread_id=side.thread_id)][:1] == ["aside"]
    main = selectors.thread_history(chat=chat, thread_id=None)
    assert main == list(Message.objects.filter(chat=chat, thread__isnull=True).order_by("id"))
    assert [m.pk for m in main][:1] == [first.pk] and second.pk in [m.pk for m in main]
    assert "aside" not in [m.content for m in main]
    assert all(m.chat_id == chat.pk for m in main) and main[1].sender_agent_id == agent.pk
    # An edit since the last read is what the next read gives: rows are never kept.
    services.edit_message(message=first, content="first, edited")
    assert selectors.thread_history(chat=chat, thread_id=None)[0].content == "first, edited"
    assert selectors.thread_history(chat=services.create_chat(owner=chat.owner, title="Empty"), thread_id=None) == []


def test_a_reply_is_read_locked_with_its_chat_and_sender(scripted_agent, run_now):
    agent = scripted_agent(reply="Done.")
    services.send_message(chat=agent.main_chat, content="Hello")
    run_now()
    reply = Message.objects.get(sender_agent=agent)
    with transaction.atomic():
        locked = REPLY_TO_SETTLE.get(pk=reply.pk)
    assert fields_of(locked) == fields_of(reply)
    assert locked.chat.title == agent.main_chat.title and locked.sender_agent.name == agent.name


def test_the_sql_is_built_once_for_every_later_read(scripted_agent, run_now):
    agent = scripted_agent(reply="Done.")
    run_ids = []
    for index in range(3):
        trigger = services.send_message(chat=agent.main_chat, content=f"Message {index}")
        run_ids.append(Run.objects.get(trigger_message=trigger).pk)
    run_now()
    load_run(run_ids[0])
    with mock.patch.object(SQLCompiler, "as_sql", autospec=True, side_effect=SQLCompiler.as_sql) as as_sql:
        with CaptureQueriesContext(connection) as statements:
            runs = [load_run(run_id) for run_id in run_ids[1:]]
            assert [(run.pk, run.agent.name, run.chat.title, run.thread) for run in runs] == [
                (run_id, agent.name, agent.main_chat.title, None) for run_id in run_ids[1:]
            ]
        assert len(statements) == 2  # one each, its parts included
        selectors.thread_history(chat=agent.main_chat, thread_id=None)
        selectors.thread_history(chat=agent.main_chat, thread_id=None)
    assert as_sql.call_count <= 1  # the thread history's first read builds its own, once
    assert RUN_WITH_ITS_PARTS._plans


def test_a_read_it_cannot_place_its_values_in_is_refused():
    # The stand-in value already among the queryset's own: which parameter is the chat's is unclear.
    stand_in = _stand_in(Chat._meta.pk, 0)
    read = PreparedRead(lambda: Message.objects.filter(chat_id=stand_in), "chat")
    with pytest.raises(ValueError, match="cannot place chat"):
        read.fetch(chat=1)


def test_a_message_goes_to_the_chats_other_live_members_in_the_order_they_joined(make_agent, user, other_user):
    first, second, gone = (make_agent(user, name=name) for name in ("First", "Second", "Gone"))
    chat = services.create_chat(owner=user, title="Three agents", agents=[first, second, gone])
    gone.deleted_at = timezone.now()
    gone.save(update_fields=["deleted_at"])
    make_agent(other_user, name="Elsewhere")  # a member of no chat of this one's
    question = Message(chat=chat, kind=Message.Kind.MESSAGE)
    assert [agent.name for agent in delivery.recipients(question)] == ["First", "Second"]
    answer = Message(chat=chat, kind=Message.Kind.MESSAGE, sender_agent=second)
    assert [agent.name for agent in delivery.recipients(answer)] == ["First"]
    services.remove_member(chat=chat, agent=first)
    assert delivery.recipients(answer) == []
    assert delivery.recipients(Message(chat=chat, kind=Message.Kind.RESOURCE)) == []


def test_a_turn_sees_its_users_memory_as_it_is_now(user, other_user):
    memory.set_content(owner=user, label="profile", content="Prefers metric units")
    memory.set_content(owner=user, label="about", content="Lives in Lyon")
    memory.set_content(owner=other_user, label="profile", content="Someone else")
    assert [(b["label"], b["content"]) for b in memory.snapshot(owner=user.pk)] == [
        ("about", "Lives in Lyon"), ("profile", "Prefers metric units"),
    ]
    memory.set_content(owner=user, label="about", content="Moved to Nantes")
    assert memory.snapshot(owner=user)[0]["content"] == "Moved to Nantes"
