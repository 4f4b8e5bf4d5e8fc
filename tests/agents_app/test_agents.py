"""Agents: who answers, what they see, the built-in Librarian, and the registry pages."""

import pytest
from django.urls import reverse

from agents_app.models import Agent, Run
from agents_app.turns.inputs import conversation_messages, turn_instructions
from chats import memory, services
from chats.models import Message
from chats.selectors import thread_history

pytestmark = pytest.mark.django_db(transaction=True)


def agent_replies(agent):
    return list(Message.objects.filter(sender_agent=agent, kind="message").order_by("id"))


def test_two_agents_that_mention_each_other_cannot_loop(scripted_agent, user, run_now, settings):
    settings.HUB_MAX_AGENT_HOPS = 3
    ping = scripted_agent(name="Ping", reply="@Pong your turn")
    pong = scripted_agent(name="Pong", reply="@Ping back to you", reply_policy="mentioned")
    chat = services.create_chat(owner=user, title="Loop", agents=[ping, pong])
    services.send_message(chat=chat, content="start")
    outcomes = run_now(limit=50)
    assert outcomes == ["succeeded"] * 3
    senders = [m.sender_agent.name for m in chat.messages.filter(kind="message", sender_agent__isnull=False)]
    assert senders == ["Ping", "Pong", "Ping"]
    assert not Run.objects.filter(status__in=["queued", "running"]).exists()
    # A new user message starts a new round.
    services.send_message(chat=chat, content="again")
    assert run_now(limit=50) == ["succeeded"] * 3


def test_reply_policies(scripted_agent, user, run_now):
    always = scripted_agent(name="Always", reply="a")
    mentioned = scripted_agent(name="Quiet", reply="q", reply_policy="mentioned")
    never = scripted_agent(name="Mute", reply="m", reply_policy="never")
    chat = services.create_chat(owner=user, title="P", agents=[always, mentioned, never])
    services.send_message(chat=chat, content="hello all")
    run_now()
    assert [len(agent_replies(a)) for a in (always, mentioned, never)] == [1, 0, 0]
    services.send_message(chat=chat, content="hey @Quiet and @Mute")
    run_now()
    assert [len(agent_replies(a)) for a in (always, mentioned, never)] == [1, 1, 0], "mentions single out"
    services.send_message(chat=chat, content="@always, you alone")
    run_now()
    assert [len(agent_replies(a)) for a in (always, mentioned, never)] == [2, 1, 0]
    services.send_message(chat=chat, content="mail me at quiet@Quiet.example, everyone")
    run_now()
    assert [len(agent_replies(a)) for a in (always, mentioned, never)] == [3, 1, 0], "an address is no mention"


def test_an_agent_answers_another_agent_only_when_mentioned(scripted_agent, user, run_now):
    talker = scripted_agent(name="Talker", reply="just saying")
    listener = scripted_agent(name="Listener", reply="heard")
    chat = services.create_chat(owner=user, title="T", agents=[talker, listener])
    services.send_message(chat=chat, content="hi")
    run_now()
    # Both answered the user; neither answered the other's unmentioning reply.
    assert len(agent_replies(talker)) == 1 and len(agent_replies(listener)) == 1


def test_reasoning_and_tool_logs_are_stored_and_never_fed_back(scripted_agent, run_now):
    agent = scripted_agent(reply="Done: {prompt}", reasoning="Let me think about it.",
                           tools=[("record_effect", {"key": "r1"})])
    services.send_message(chat=agent.main_chat, content="first")
    run_now()
    reply = agent_replies(agent)[0]
    reasoning = Message.objects.get(kind="log", subkind="reasoning")
    tool = Message.objects.get(kind="log", subkind="tool")
    assert reasoning.content == "Let me think about it." and reasoning.reply_to == reply
    assert tool.reply_to == reply and tool.data["result"] == "recorded r1"
    second = services.send_message(chat=agent.main_chat, content="second")
    run = Run.objects.get(trigger_message=second)
    rows = thread_history(chat=run.chat, thread_id=run.thread_id)
    seen = " ".join(str(part.content) for m in conversation_messages(run, rows) for part in m.parts)
    assert "first" in seen and "Done: first" in seen
    assert "Let me think" not in seen and "recorded r1" not in seen


def test_notes_are_annotations_not_conversation(scripted_agent, run_now):
    agent = scripted_agent(reply="I was told: {instructions}")
    chat = agent.main_chat
    services.send_message(chat=chat, content="Prefer metric units", kind="note")
    trigger = services.send_message(chat=chat, content="how far?")
    run = Run.objects.get(trigger_message=trigger)
    rows = thread_history(chat=run.chat, thread_id=run.thread_id)
    assert "Prefer metric units" in turn_instructions(run, rows)
    seen = [part.content for m in conversation_messages(run, rows) for part in m.parts]
    assert "Prefer metric units" not in seen
    run_now()
    assert "Notes the user attached" in agent_replies(agent)[0].content


def test_memory_is_frozen_within_a_turn_and_read_again_at_the_next(scripted_agent, user, run_now):
    memory.append(owner=user, label="memory", text="The user's name is Ada.")
    agent = scripted_agent(reply="Memory: {instructions}", tools=[("remember", {"text": "Ada likes tea."})])
    services.send_message(chat=agent.main_chat, content="one")
    run_now()
    first = agent_replies(agent)[0].content
    assert "Ada." in first and "likes tea" not in first  # written during the turn, not seen in it
    assert "Ada likes tea." in memory.get_block(owner=user, label="memory").content
    agent.tools = []
    agent.save()
    services.send_message(chat=agent.main_chat, content="two")
    run_now()
    assert "Ada likes tea." in agent_replies(agent)[1].content


def test_unreadable_memory_does_not_stop_the_turn(scripted_agent, run_now, monkeypatch, caplog):
    def broken(**kwargs):
        raise RuntimeError("memory store down")

    monkeypatch.setattr(memory, "snapshot", broken)
    agent = scripted_agent(reply="still here")
    services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["succeeded"]
    assert agent_replies(agent)[0].content == "still here"
    assert "shared memory could not be read" in caplog.text


@pytest.fixture
def librarian_chat(user):
    from agents_app.services import ensure_builtin_agents

    ensure_builtin_agents()  # made by a migration; transactional tests flush it
    librarian = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    return services.create_chat(owner=user, title="Ask the Librarian", agents=[librarian]), librarian


def ask(chat, librarian, text, run_now):
    services.send_message(chat=chat, content=text)
    assert run_now() == ["succeeded"]
    return agent_replies(librarian)[-1]


def test_librarian_finds_what_i_said_with_links(user, librarian_chat, run_now):
    chat, librarian = librarian_chat
    garden = services.create_chat(owner=user, title="Garden")
    said = services.send_message(chat=garden, content="The tomatoes need more sun this year.")
    services.create_chat(owner=user, title="Other")
    reply = ask(chat, librarian, "What did I say about tomatoes?", run_now)
    assert f"[Garden](/chats/{garden.pk}/#message-{said.pk})" in reply.content  # the page opens at the message
    assert "**tomatoes**" in reply.content
    assert reply.status == "final"


def test_librarian_remembers_and_recalls(user, librarian_chat, run_now):
    chat, librarian = librarian_chat
    ask(chat, librarian, "Remember that my cat is called Tom", run_now)
    block = memory.get_block(owner=user, label="memory")
    assert block.content == "my cat is called Tom"
    entry = block.entries.get()
    assert entry.chat == chat and entry.agent == librarian
    reply = ask(chat, librarian, "What do you remember?", run_now)
    assert "my cat is called Tom" in reply.content


@pytest.mark.parametrize("said, kept", [
    ("Note that the boiler is serviced in May", "the boiler is serviced in May"),
    ("make a note: the spare key is with Ana", "the spare key is with Ana"),
    ("Please jot down that rent is due on the 3rd", "rent is due on the 3rd"),
])
def test_a_note_to_the_librarian_is_kept_not_searched(user, librarian_chat, run_now, said, kept):
    chat, librarian = librarian_chat
    reply = ask(chat, librarian, said, run_now)
    assert reply.content == f"I'll remember that: {kept}"
    assert memory.get_block(owner=user, label="memory").content == kept
    assert not Message.objects.filter(reply_to=reply, kind="log", data__name="search_messages").exists()


def test_librarian_lists_chats_and_says_what_it_is(user, librarian_chat, run_now):
    chat, librarian = librarian_chat
    reply = ask(chat, librarian, "list my chats", run_now)
    assert f"/chats/{chat.pk}/" in reply.content
    reply = ask(chat, librarian, "hello", run_now)
    assert "not a language model" in reply.content
    reply = ask(chat, librarian, "what did I say about zeppelins?", run_now)
    assert "found nothing" in reply.content


def test_librarian_finds_the_words_of_a_question_on_different_lines_and_lists_plain_previews(
        user, librarian_chat, run_now):
    chat, librarian = librarian_chat
    pantry = services.create_chat(owner=user, title="Pantry")
    services.send_message(chat=pantry, content="Shopping:\n- **miso**\n- soup bones")
    reply = ask(chat, librarian, "What did I say about the miso and the soup?", run_now)
    assert f"[Pantry](/chats/{pantry.pk}/#message-" in reply.content
    reply = ask(chat, librarian, "list my chats", run_now)
    assert "Shopping: miso soup bones" in reply.content and "**miso**" not in reply.content


def test_a_regenerated_librarian_answer_keeps_each_versions_own_tool_steps(user, librarian_chat, run_now):
    from agents_app.services import regenerate

    chat, librarian = librarian_chat
    first = ask(chat, librarian, "list my chats", run_now)
    first_steps = list(Message.objects.filter(reply_to=first, kind="log").values_list("pk", flat=True))
    regenerate(message=first)
    assert run_now() == ["succeeded"]
    first.refresh_from_db()
    steps = list(Message.objects.filter(reply_to=first, kind="log").values_list("pk", flat=True))
    assert len(first_steps) == 1 and len(steps) == 2
    assert first.data["versions"][0]["log_ids"] == first_steps  # the earlier answer's card, and only it


def test_librarian_answers_from_the_text_of_a_file_with_a_link_to_it(user, other_user, librarian_chat, run_now,
                                                                     settings, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.chats.test_reading import pdf_with_pages

    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    chat, librarian = librarian_chat
    flat = services.create_chat(owner=user, title="Flat hunting")
    pages = ["The flat has two rooms and a balcony. " * 10] * 3 + ["Tenants may keep small pets such as cats."]
    lease = services.upload_file(chat=flat, upload=SimpleUploadedFile("lease.pdf", pdf_with_pages(pages)))
    services.read_file_text(file_id=str(lease.pk))
    theirs = services.create_chat(owner=other_user, title="Theirs")
    secret = services.upload_file(chat=theirs, upload=SimpleUploadedFile("secret.pdf", pdf_with_pages(
        ["Pets of the other tenant: a lease clause."])))
    services.read_file_text(file_id=str(secret.pk))

    reply = ask(chat, librarian, "What does the lease say about pets?", run_now)
    assert f"[lease.pdf](/files/{lease.pk}/), page 4, in [Flat hunting](/chats/{flat.pk}/)" in reply.content
    assert "**pets**" in reply.content and "secret" not in reply.content and str(secret.pk) not in reply.content
    reply = ask(chat, librarian, "What does the lease say about parking?", run_now)
    assert "found nothing" in reply.content and "files" in reply.content


def test_librarian_never_shows_another_users_messages(user, other_user, librarian_chat, run_now):
    chat, librarian = librarian_chat
    secret_chat = services.create_chat(owner=other_user, title="Private")
    services.send_message(chat=secret_chat, content="my bank pin is 1234")
    reply = ask(chat, librarian, "what did I say about bank?", run_now)
    assert "1234" not in reply.content and str(secret_chat.pk) not in reply.content


def test_agent_pages_create_edit_delete(client, user, other_user, make_agent):
    client.force_login(user)
    response = client.post(reverse("agents:create"), {
        "name": "Poet", "model": "openai:gpt-4.1-mini", "reply_policy": "always", "recovery_policy": "continue",
        "temperature": "0.7", "tools": ["search_messages"], "vision": "no",
    })
    poet = Agent.objects.get(owner=user, name="Poet")
    assert response.status_code == 302 and response["Location"] == reverse("chats:detail", args=[poet.main_chat_id])
    assert poet.settings == {"temperature": 0.7, "vision": False} and poet.tools == ["search_messages"]
    assert 'value="no" selected' in client.get(reverse("agents:edit", args=[poet.pk])).content.decode()
    response = client.post(reverse("agents:edit", args=[poet.pk]), {
        "name": "Poet", "model": "openai:gpt-4.1-mini", "reply_policy": "mentioned",
        "recovery_policy": "stop",
    })
    poet.refresh_from_db()
    assert response.status_code == 302 and poet.reply_policy == "mentioned" and poet.settings == {}
    theirs = make_agent(other_user, name="Theirs")
    assert client.get(reverse("agents:edit", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("agents:delete", args=[theirs.pk])).status_code == 404
    shared = make_agent(None, name="Shared")
    assert client.post(reverse("agents:delete", args=[shared.pk])).status_code == 404
    client.post(reverse("agents:delete", args=[poet.pk]))
    poet.refresh_from_db()
    assert poet.deleted_at is not None and not poet.memberships.exists()


def test_agent_form_names_the_wrong_field(client, user):
    client.force_login(user)
    response = client.post(reverse("agents:create"), {"name": "", "model": "x", "reply_policy": "always",
                                                       "recovery_policy": "continue"})
    assert response.status_code == 400 and b"id_name-error" in response.content
    assert not Agent.objects.filter(owner=user).exists()


def test_provider_keys_are_never_shown_again(client, user):
    from agents_app import secrets

    client.force_login(user)
    client.post(reverse("agents:keys"), {"provider": "openai", "key": "sk-test-SECRET-abcd1234"})
    page = client.get(reverse("agents:keys"))
    assert b"SECRET" not in page.content and b"1234" in page.content
    row = user.provider_keys.get()
    assert "SECRET" not in row.encrypted_key
    assert secrets.key_for(owner_id=user.pk, provider="openai") == "sk-test-SECRET-abcd1234"


@pytest.mark.parametrize("fields, field", [
    ({"model": "gpt4"}, "model"),
    ({"model": "martian:gpt"}, "model"),
    ({"model": "builtin:oracle"}, "model"),
    ({"model": "openai:x", "base_url": "ftp://example.com"}, "base_url"),
    ({"model": "openai:x", "base_url": "http://user:pass@example.com/v1"}, "base_url"),
    ({"model": "openai:x", "tools": ["rm_rf"]}, "tools"),
])
def test_saving_an_agent_refuses_bad_models_urls_and_tools(user, fields, field):
    from agents_app.services import create_agent
    from hub.errors import InvalidInput

    with pytest.raises(InvalidInput) as err:
        create_agent(owner=user, name="Bad", **{"model": "openai:x", **fields})
    assert field in err.value.fields
    assert not Agent.objects.filter(owner=user).exists()


def test_a_provider_in_the_environment_brings_a_shared_assistant(monkeypatch):
    from agents_app.services import ensure_builtin_agents

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    created = ensure_builtin_agents()
    assistant = Agent.objects.get(owner__isnull=True, name="Assistant")
    assert assistant.model.startswith("openai:") and assistant in created
    assert ensure_builtin_agents() == []  # once only


def test_a_chat_without_a_language_model_is_titled_from_its_first_message(user, scripted_agent, run_now):
    from agents_app import titles

    agent = scripted_agent(name="Offline")
    chat = services.create_chat(owner=user, agents=[agent])
    services.send_message(chat=chat, content="**Miso** soup: how long should it simmer?")
    run_now()
    reply = Message.objects.get(chat=chat, sender_agent=agent, kind="message")
    assert titles.wants_generated_title(chat, reply)
    assert titles.generate_title(chat_id=chat.pk, reply_id=reply.pk) == "Miso soup: how long should it simmer?"
    chat.refresh_from_db()
    assert chat.title == "Miso soup: how long should it simmer?"
    services.send_message(chat=chat, content="and the tofu?")
    run_now()
    assert not titles.wants_generated_title(chat, Message.objects.filter(chat=chat, sender_agent=agent).last())


def test_a_reply_queues_a_title_unless_the_chat_is_named(user, make_agent, scripted_agent,
                                                                           run_now):
    from agents_app import titles

    real = make_agent(user, name="Real", model="openai:gpt-4.1-mini")
    chat = services.create_chat(owner=user, agents=[real])
    reply = services.send_message(chat=chat, content="hello", sender_agent=real)
    assert chat.title == services.default_title(chat.created_at)
    assert titles.wants_generated_title(chat, reply) is True
    services.update_chat(chat=chat, title="Named by me")
    chat.refresh_from_db()
    assert titles.wants_generated_title(chat, reply) is False
    scripted = scripted_agent(name="Offline")
    assert titles.wants_generated_title(scripted.main_chat, reply.__class__(sender_agent=scripted)) is False
    assert titles.clean_title('  "Trip to Lisbon"\n') == "Trip to Lisbon"
    assert titles.clean_title("**Miso** and `dashi`: see [the recipe](https://x.test)") == (
        "Miso and dashi: see the recipe"), "a title holds no Markdown"
    assert titles.clean_title("Sure! Planning a long trip to Lisbon and Porto by train in October\nHope it helps") == (
        "Sure! Planning a long trip to Lisbon and"
    ), "the first line, at most eight words"
    assert len(titles.clean_title("Supercalifragilistic " * 5)) <= titles.MAX_TITLE_CHARS + 1
