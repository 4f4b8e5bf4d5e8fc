"""Temporary chats: kept in an image (Redis, or memory when embedded), never in the database."""

import threading

import pytest
from django.db import connection

from agents_app.models import Run
from chats import services
from chats.models import Chat, Message
from chats.temporary import chats as temporary_chats
from chats.temporary.scope import current, inside, outside

pytestmark = pytest.mark.django_db(transaction=True)


def hub_columns():
    """Every (table, column) of the hub's database, the search index's tables among them."""
    columns = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            for column in connection.introspection.get_table_description(cursor, table):
                columns.append((table, column.name))
    return columns


def hub_rows_containing(text: str) -> list[tuple[str, str]]:
    found = []
    for table, column in hub_columns():
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT COUNT(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE %s', [f"%{text}%"]
            )
            if cursor.fetchone()[0]:
                found.append((table, column))
    return found


def test_a_temporary_chat_is_found_only_inside_its_image(user):
    chat = services.create_chat(owner=user, title="Quick question", temporary=True)
    assert not Chat.objects.filter(pk=chat.pk).exists()
    assert temporary_chats.exists(chat.pk) and temporary_chats.owned(user.pk) == [str(chat.pk)]
    with inside(chat.pk):
        assert current() == str(chat.pk)
        assert Chat.objects.get(pk=chat.pk).title == "Quick question"
        with outside():
            assert current() is None
            assert not Chat.objects.filter(pk=chat.pk).exists()
    assert current() is None


def test_a_conversation_with_two_agents_leaves_no_text_in_the_database(user, make_agent, run_now):
    first, second = make_agent(user, name="First"), make_agent(user, name="Second")
    chat = services.create_chat(owner=user, title="Zanzibar plans", agents=[first, second], temporary=True)
    with inside(chat.pk):
        services.send_message(chat=chat, content="What about quokkas-in-Zanzibar?")
        outcomes = run_now()
        replies = list(Message.objects.filter(chat=chat, sender_agent__isnull=False).order_by("id"))
        runs = list(Run.objects.filter(chat=chat))
    assert len(runs) == 2 and all(run.status == Run.Status.SUCCEEDED for run in runs), outcomes
    assert {reply.sender_agent_id for reply in replies} == {first.pk, second.pk}
    assert all(reply.content for reply in replies)
    assert ("auth_user", "username") in hub_rows_containing(user.username)  # the scan finds text
    assert hub_rows_containing("Zanzibar") == []
    assert hub_rows_containing(replies[0].content[:30]) == []
    assert not Run.objects.exists()


def test_rows_of_a_temporary_chat_have_ids_no_stored_row_will_reach(user):
    chat = services.create_chat(owner=user, temporary=True)
    with inside(chat.pk):
        message = services.send_message(chat=chat, content="hi")
    assert 2**52 <= message.pk < 2**53


def test_another_thread_sees_what_one_wrote(user):
    chat = services.create_chat(owner=user, temporary=True)
    with inside(chat.pk):
        services.send_message(chat=chat, content="from the first thread")
    seen = []

    def read():
        with inside(chat.pk):
            seen.extend(Message.objects.filter(chat_id=chat.pk).values_list("content", flat=True))

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    assert seen == ["from the first thread"]


def test_writers_in_many_threads_lose_nothing(user):
    chat = services.create_chat(owner=user, temporary=True)

    def write(n):
        with inside(chat.pk):
            for i in range(5):
                services.send_message(chat=chat, content=f"writer {n} message {i}")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with inside(chat.pk):
        assert Message.objects.filter(chat_id=chat.pk).count() == 20


def test_a_removed_chat_is_gone(user):
    chat = services.create_chat(owner=user, temporary=True)
    temporary_chats.remove(chat.pk, owner_id=user.pk)
    assert not temporary_chats.exists(chat.pk)
    assert temporary_chats.owned(user.pk) == []


def test_the_directory_lists_temporary_chats_among_stored_ones_marked_and_searchable(user, other_user):
    from chats import events, selectors

    stored = services.create_chat(owner=user, title="Stored plans")
    temporary = services.create_chat(owner=user, title="Temporary plans", temporary=True)
    services.create_chat(owner=other_user, title="Not yours", temporary=True)
    page = selectors.directory_page(user=user)
    assert [str(c.pk) for c in page.chats] == [str(temporary.pk), str(stored.pk)]
    payloads = {p["title"]: p for p in (events.chat_payload(c) for c in page.chats)}
    assert payloads["Temporary plans"]["kind"] == "temporary"
    assert payloads["Temporary plans"]["expires_at"] is not None
    assert payloads["Stored plans"]["kind"] == "stored" and payloads["Stored plans"]["expires_at"] is None
    assert [c.title for c in selectors.directory_page(user=user, search="temporary").chats] == ["Temporary plans"]
    first = selectors.directory_page(user=user, limit=1)
    rest = selectors.directory_page(user=user, limit=1, before=first.next_cursor)
    assert [c.title for c in first.chats + rest.chats] == ["Temporary plans", "Stored plans"]


def test_another_users_temporary_chat_is_not_found(user, other_user):
    from chats import selectors
    from hub.errors import NotFound

    chat = services.create_chat(owner=other_user, title="Mine", temporary=True)
    with inside(chat.pk), pytest.raises(NotFound):
        selectors.chat_for_user(user=user, chat_id=chat.pk)


def test_saving_stores_everything_in_order_and_twice_is_no_change(user, make_agent, run_now):
    agent = make_agent(user, name="Helper")
    chat = services.create_chat(owner=user, title="Keep me", agents=[agent], temporary=True)
    with inside(chat.pk):
        question = services.send_message(chat=chat, content="A question worth keeping", new_thread_title="Side")
        run_now()
        reply = Message.objects.filter(chat=chat, sender_agent=agent).get()
    saved = services.save_chat(chat=chat)
    assert not temporary_chats.exists(chat.pk)
    assert saved.pk == chat.pk and saved.title == "Keep me"
    stored_question, stored_reply = Message.objects.filter(chat=saved).order_by("id")
    assert stored_question.content == "A question worth keeping" and stored_question.thread.title == "Side"
    assert stored_reply.content == reply.content and stored_reply.thread_id == stored_question.thread_id
    assert list(saved.memberships.values_list("agent_id", flat=True)) == [agent.pk]
    run = Run.objects.get(chat=saved)
    assert run.status == Run.Status.SUCCEEDED
    assert (run.trigger_message_id, run.reply_message_id, run.thread_id) == (
        stored_question.pk, stored_reply.pk, stored_question.thread_id)
    assert stored_reply.run_id == run.pk
    later = services.send_message(chat=saved, content="written after saving", thread=stored_question.thread)
    assert later.pk > stored_reply.pk  # the saved messages stay first
    assert question.pk != stored_question.pk
    assert services.save_chat(chat=saved).pk == saved.pk
    assert Chat.objects.filter(pk=chat.pk).count() == 1


def test_a_chat_with_a_reply_still_being_written_is_not_saved(user, make_agent):
    from hub.errors import Conflict

    chat = services.create_chat(owner=user, agents=[make_agent(user)], temporary=True)
    with inside(chat.pk):
        services.send_message(chat=chat, content="answer me")  # its run stays queued
    with pytest.raises(Conflict):
        services.save_chat(chat=chat)
    assert temporary_chats.exists(chat.pk) and not Chat.objects.filter(pk=chat.pk).exists()


def test_deleting_a_temporary_chat_removes_it_at_once(user):
    chat = services.create_chat(owner=user, temporary=True)
    with inside(chat.pk):
        services.delete_chat(chat=Chat.objects.get(pk=chat.pk))
    assert not temporary_chats.exists(chat.pk)


def test_without_its_store_a_temporary_chat_is_refused_clearly_and_stored_chats_work(user, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from chats.temporary import images

    class Away(images.MemoryImages):
        def create(self, key, image):
            raise RedisConnectionError("Connection refused")

        def version(self, key):
            raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(images, "_images", Away())
    with pytest.raises(temporary_chats.TemporaryChatsUnavailable) as refused:
        services.create_chat(owner=user, title="Quick", temporary=True)
    assert "cannot reach Redis" in refused.value.message and refused.value.status == 503
    stored = services.create_chat(owner=user, title="Stored")
    services.send_message(chat=stored, content="still works")
    assert not temporary_chats.exists(stored.pk)


async def test_a_socket_on_a_temporary_chat_sends_hears_and_follows_it_when_saved(user):
    from channels.db import database_sync_to_async

    from tests.chats.test_consumers import open_socket, receive_type

    chat = await database_sync_to_async(services.create_chat)(owner=user, title="Live scratch", temporary=True)
    tab, connected, _ = await open_socket(user, chat.pk)
    assert connected
    await tab.send_json_to({"type": "message.send", "content": "said in a temporary chat", "client_id": "t1"})
    created = await receive_type(tab, "message.created")
    assert created["message"]["content"] == "said in a temporary chat" and created["client_id"] == "t1"
    saved = await database_sync_to_async(services.save_chat)(chat=chat)
    event = await receive_type(tab, "chat.saved")
    assert event["chat"]["kind"] == "stored" and event["chat"]["id"] == str(chat.pk)
    await tab.send_json_to({"type": "message.send", "content": "said after saving", "client_id": "t2"})
    assert (await receive_type(tab, "message.created"))["client_id"] == "t2"
    contents = await database_sync_to_async(
        lambda: list(Message.objects.filter(chat=saved).values_list("content", flat=True)))()
    assert contents == ["said in a temporary chat", "said after saving"]
    await tab.disconnect()


async def test_a_socket_on_another_users_temporary_chat_is_refused(user, other_user):
    from channels.db import database_sync_to_async

    from tests.chats.test_consumers import open_socket

    chat = await database_sync_to_async(services.create_chat)(owner=other_user, temporary=True)
    _, connected, code = await open_socket(user, chat.pk)
    assert not connected and code == 4404


def test_a_temporary_chats_page_shows_it_with_the_stored_chats_in_the_sidebar(user, client):
    import json
    import re

    stored = services.create_chat(owner=user, title="Stored one")
    temporary = services.create_chat(owner=user, title="Scratchpad", temporary=True)
    client.force_login(user)
    page = client.get(f"/chats/{temporary.pk}/")
    assert page.status_code == 200
    initial = json.loads(re.search(r'id="hub-initial"[^>]*>(.*?)</script>', page.content.decode(), re.S).group(1))
    assert initial["open"]["chat"]["kind"] == "temporary" and initial["open"]["chat"]["title"] == "Scratchpad"
    listed = [(c["id"], c["kind"]) for c in initial["directory"]["chats"]]
    assert listed == [(str(temporary.pk), "temporary"), (str(stored.pk), "stored")]


def test_the_librarian_in_a_temporary_chat_lists_and_searches_every_chat_and_does_not_write_memory(user, run_now):
    from agents_app.models import Agent
    from agents_app.services import ensure_builtin_agents
    from chats import memory

    ensure_builtin_agents()
    librarian = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    garden = services.create_chat(owner=user, title="Garden")
    services.send_message(chat=garden, content="The tomatoes need more sun this year.")
    scratch = services.create_chat(owner=user, title="Scratch", agents=[librarian], temporary=True)
    other = services.create_chat(owner=user, title="Sketches", temporary=True)
    with inside(other.pk):
        services.send_message(chat=other, content="Tomatoes drawn in charcoal.")

    def ask(text):
        with inside(scratch.pk):
            services.send_message(chat=scratch, content=text)
            assert run_now() == ["succeeded"]
            replies = Message.objects.filter(chat_id=scratch.pk, sender_agent=librarian, kind="message")
            return replies.order_by("-id").first().content

    listed = ask("list my chats")
    assert f"[Garden](/chats/{garden.pk}/)" in listed
    assert f"[Sketches](/chats/{other.pk}/) (temporary · expires in 24 h)" in listed
    found = ask("What did I say about tomatoes?")
    assert f"/chats/{garden.pk}/" in found and f"/chats/{other.pk}/" in found
    refused = ask("remember that I like charcoal")
    assert refused.startswith("Not remembered: this is a temporary chat")
    assert memory.get_block(owner=user, label="memory") is None
    assert hub_rows_containing("charcoal") == []


async def test_an_expired_temporary_chat_is_gone_from_the_list_and_its_socket_is_told(user, settings):
    import asyncio

    from channels.db import database_sync_to_async

    from chats import selectors
    from tests.chats.test_consumers import open_socket, receive_type

    settings.HUB_TEMPORARY_HOURS = 1.5 / 3600  # a second and a half
    chat = await database_sync_to_async(services.create_chat)(owner=user, title="Fleeting", temporary=True)
    tab, connected, _ = await open_socket(user, chat.pk)
    assert connected
    listed = await database_sync_to_async(lambda: [c.title for c in selectors.directory_page(user=user).chats])()
    assert listed == ["Fleeting"]
    assert await database_sync_to_async(services.expire_temporary_chats)() == 0  # not yet
    await asyncio.sleep(2)
    assert await database_sync_to_async(services.expire_temporary_chats)() == 1
    assert (await receive_type(tab, "chat.deleted"))["chat_id"] == str(chat.pk)
    closed = await tab.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4410}  # the page shows it is gone
    assert await database_sync_to_async(lambda: selectors.directory_page(user=user).chats)() == []
    assert not await database_sync_to_async(temporary_chats.exists)(chat.pk)


def test_the_sweep_recovers_a_turn_whose_worker_died_in_a_temporary_chat(user, make_agent):
    from datetime import timedelta

    from django.utils import timezone

    from agents_app.turns import recovery

    chat = services.create_chat(owner=user, agents=[make_agent(user)], temporary=True)
    with inside(chat.pk):
        services.send_message(chat=chat, content="answer me")
        run = Run.objects.get(chat_id=chat.pk)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, lease_owner="elsewhere:1:1",
                                             lease_expires_at=timezone.now() - timedelta(seconds=5))
    counts = recovery.sweep_everywhere()
    assert counts["recovered"] == 1
    with inside(chat.pk):
        assert Run.objects.get(pk=run.pk).status == Run.Status.RECOVERED
        assert Run.objects.filter(chat_id=chat.pk, status=Run.Status.QUEUED).count() == 1
    assert not Run.objects.exists()


def test_a_temporary_chat_is_not_forked_until_it_is_saved(user):
    from hub.errors import Conflict

    chat = services.create_chat(owner=user, title="Draft", temporary=True)
    with inside(chat.pk):
        message = services.send_message(chat=chat, content="a first idea")
        with pytest.raises(Conflict, match="save it first"):
            services.fork_chat(chat=chat, at_message=message)
    saved = services.save_chat(chat=chat)
    fork = services.fork_chat(chat=saved, at_message=Message.objects.get(chat=saved))
    assert list(fork.messages.values_list("content", flat=True)) == ["a first idea"]


def test_a_turn_in_a_temporary_chat_uses_the_owners_own_provider_key(user):
    from agents_app import secrets

    secrets.store_key(owner=user, provider="openai", key="sk-own-key-1234")
    chat = services.create_chat(owner=user, temporary=True)
    with inside(chat.pk):
        assert secrets.key_for(owner_id=user.pk, provider="openai") == "sk-own-key-1234"


def test_edit_regenerate_and_a_note_work_in_a_temporary_chat_from_the_page(user, make_agent, client, run_now):
    agent = make_agent(user, name="Helper")
    chat = services.create_chat(owner=user, agents=[agent], temporary=True)
    client.force_login(user)
    with inside(chat.pk):
        question = services.send_message(chat=chat, content="first draft")
        services.send_message(chat=chat, content="a note to self", kind="note")
        run_now()
        reply = Message.objects.get(chat_id=chat.pk, sender_agent=agent, kind="message")
        services.edit_message(message=question, content="second draft")
    regenerated = client.post(f"/chats/{chat.pk}/messages/{reply.pk}/regenerate/", content_type="application/json")
    assert regenerated.status_code == 202, regenerated.content
    with inside(chat.pk):
        run_now()
        reply.refresh_from_db()
        assert reply.status == "final" and len(reply.data["versions"]) == 1
        assert Message.objects.get(pk=question.pk).content == "second draft"
        assert Message.objects.get(chat_id=chat.pk, kind="note").content == "a note to self"
    state = client.get(f"/chats/{chat.pk}/state/").json()
    assert state["chat"]["kind"] == "temporary"
    assert hub_rows_containing("draft") == []


def test_listing_many_temporary_chats_from_inside_one_leaves_it_usable(user):
    from chats import selectors

    chats = [services.create_chat(owner=user, title=f"Scratch {n}", temporary=True) for n in range(7)]
    with inside(chats[0].pk):
        assert len(selectors.directory_page(user=user).chats) == 7
        services.send_message(chat=chats[0], content="still here")
        assert Message.objects.filter(chat_id=chats[0].pk).count() == 1


def test_an_agent_made_after_the_temporary_chat_can_join_and_answer_in_it(user, make_agent, client, run_now):
    chat = services.create_chat(owner=user, title="Early", temporary=True)
    late = make_agent(user, name="Latecomer")
    client.force_login(user)
    added = client.post(f"/chats/{chat.pk}/members/", {"agent_id": late.pk}, content_type="application/json")
    assert added.status_code == 200, added.content
    assert [m["name"] for m in added.json()["members"]] == ["Latecomer"]
    with inside(chat.pk):
        services.send_message(chat=chat, content="hello, latecomer")
        assert run_now() == ["succeeded"]
        assert Message.objects.filter(chat_id=chat.pk, sender_agent=late, kind="message").exists()
