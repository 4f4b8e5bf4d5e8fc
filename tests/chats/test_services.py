import pytest

from chats import delivery, services
from chats.models import Chat, Membership, Message, Thread
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture
def delivered():
    """Records what the agent delivery hook receives."""
    calls = []

    def handler(*, message, agents):
        calls.append((message, list(agents)))

    delivery.subscribe(handler)
    yield calls
    delivery.unsubscribe(handler)


def test_create_chat_with_members_and_default_title(user, make_agent):
    helper = make_agent(user, name="Helper")
    chat = services.create_chat(owner=user, description="d", picture="🧪", agents=[helper])
    assert chat.title.startswith("Chat — ")
    assert [m.agent for m in chat.memberships.all()] == [helper]
    assert chat.picture == "🧪"


def test_create_chat_refuses_another_users_agent(user, other_user, make_agent):
    theirs = make_agent(other_user, name="Theirs")
    with pytest.raises(InvalidInput) as err:
        services.create_chat(owner=user, title="x", agents=[theirs])
    assert "agents" in err.value.fields
    assert not Chat.objects.filter(owner=user, title="x").exists()


def test_shared_agent_can_be_added_by_anyone(user, make_agent):
    shared = make_agent(None, name="Shared")
    chat = services.create_chat(owner=user, title="x", agents=[shared])
    assert chat.memberships.get().agent == shared
    assert shared.main_chat is None


def test_creating_an_agent_creates_its_main_chat(user, make_agent):
    agent = make_agent(user, name="Scribe")
    assert agent.main_chat.owner == user
    assert agent.main_chat.title == "Scribe"
    assert list(agent.main_chat.memberships.values_list("agent", flat=True)) == [agent.pk]


def test_title_too_long_is_a_field_error(user):
    with pytest.raises(InvalidInput) as err:
        services.create_chat(owner=user, title="x" * 201)
    assert "title" in err.value.fields


def test_add_member_twice_keeps_one_membership(chat, make_agent, user):
    agent = make_agent(user)
    services.add_member(chat=chat, agent=agent)
    services.add_member(chat=chat, agent=agent)
    assert Membership.objects.filter(chat=chat, agent=agent).count() == 1


def test_remove_member(chat, make_agent, user):
    agent = make_agent(user)
    services.add_member(chat=chat, agent=agent)
    assert services.remove_member(chat=chat, agent=agent) is True
    assert services.remove_member(chat=chat, agent=agent) is False
    assert not chat.memberships.exists()


def test_delete_chat_is_soft_removes_memberships_and_is_idempotent(chat, make_agent, user):
    services.add_member(chat=chat, agent=make_agent(user))
    services.send_message(chat=chat, content="keep me")
    services.delete_chat(chat=chat)
    first = Chat.objects.get(pk=chat.pk).deleted_at
    services.delete_chat(chat=chat)
    chat.refresh_from_db()
    assert chat.deleted_at == first is not None
    assert not chat.memberships.exists()
    assert chat.messages.count() == 1  # nothing stored is lost


def test_send_into_default_thread_updates_preview(chat):
    message = services.send_message(chat=chat, content="  hello\n  world  ")
    chat.refresh_from_db()
    assert message.thread is None
    assert message.sender_user == chat.owner and message.sender_agent is None
    assert chat.last_message_preview == "hello world"
    assert chat.updated_at == message.created_at


def test_send_into_new_named_thread_then_existing_thread(chat):
    first = services.send_message(chat=chat, content="a", new_thread_title="Trip")
    thread = first.thread
    assert thread.title == "Trip" and thread.chat == chat
    second = services.send_message(chat=chat, content="b", thread=thread)
    assert second.thread == thread
    thread.refresh_from_db()
    assert thread.last_activity_at == second.created_at
    assert Thread.objects.filter(chat=chat).count() == 1


def test_thread_of_another_chat_is_refused(chat, user):
    other = services.create_chat(owner=user, title="Other")
    thread = services.send_message(chat=other, content="x", new_thread_title="T").thread
    with pytest.raises(InvalidInput) as err:
        services.send_message(chat=chat, content="y", thread=thread)
    assert "thread" in err.value.fields
    assert not chat.messages.exists()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"content": ""}, "content"),
        ({"content": "   \n"}, "content"),
        ({"content": "x" * 100_001}, "content"),
        ({"content": 42}, "content"),
        ({"content": "x", "kind": "shout"}, "kind"),
        ({"content": "x", "format": "html"}, "format"),
        ({"content": "x", "new_thread_title": "   "}, "new_thread_title"),
        ({"content": "x", "client_id": "c" * 101}, "client_id"),
    ],
)
def test_bad_input_is_a_field_error_and_writes_nothing(chat, kwargs, field):
    with pytest.raises(InvalidInput) as err:
        services.send_message(chat=chat, **kwargs)
    assert field in err.value.fields
    assert not Message.objects.exists()
    assert not Thread.objects.exists()


def test_size_limit_is_a_setting(chat, settings):
    settings.HUB_MAX_MESSAGE_CHARS = 10
    with pytest.raises(InvalidInput):
        services.send_message(chat=chat, content="x" * 11)
    assert services.send_message(chat=chat, content="x" * 10).content == "x" * 10


def test_sending_to_a_deleted_chat_is_refused(chat):
    services.delete_chat(chat=chat)
    with pytest.raises(InvalidInput):
        services.send_message(chat=chat, content="late")


def test_delivery_reaches_every_member_but_the_sender(chat, make_agent, user, delivered):
    a, b = make_agent(user, name="A"), make_agent(user, name="B")
    services.add_member(chat=chat, agent=a)
    services.add_member(chat=chat, agent=b)
    delivered.clear()

    services.send_message(chat=chat, content="from the user")
    services.send_message(chat=chat, content="from A", sender_agent=a)

    assert [(m.content, [ag.name for ag in agents]) for m, agents in delivered] == [
        ("from the user", ["A", "B"]),
        ("from A", ["B"]),
    ]


def test_resources_are_never_delivered(chat, make_agent, user, delivered):
    services.add_member(chat=chat, agent=make_agent(user))
    delivered.clear()
    services.send_message(chat=chat, content="remote: docs", kind="resource", subkind="remote")
    assert delivered == []


def test_a_failing_delivery_handler_rolls_the_message_back(chat, make_agent, user):
    services.add_member(chat=chat, agent=make_agent(user))

    def broken(*, message, agents):
        raise RuntimeError("boom")

    delivery.subscribe(broken)
    try:
        with pytest.raises(RuntimeError):
            services.send_message(chat=chat, content="all or nothing")
    finally:
        delivery.unsubscribe(broken)
    assert not Message.objects.filter(content="all or nothing").exists()


def test_edit_message(chat):
    message = services.send_message(chat=chat, content="helo")
    edited = services.edit_message(message=message, content="hello")
    assert edited.content == "hello" and edited.edited_at is not None
    chat.refresh_from_db()
    assert chat.last_message_preview == "hello"


def test_edit_refuses_empty_content_and_streaming_replies(chat, make_agent, user):
    message = services.send_message(chat=chat, content="keep")
    with pytest.raises(InvalidInput):
        services.edit_message(message=message, content="")
    message.refresh_from_db()
    assert message.content == "keep"
    agent = make_agent(user)
    streaming = services.send_message(chat=chat, content="", sender_agent=agent, status="streaming")
    with pytest.raises(InvalidInput):
        services.edit_message(message=streaming, content="hijack")


def test_update_chat_renames(chat):
    services.update_chat(chat=chat, title="  New name ")
    chat.refresh_from_db()
    assert chat.title == "New name"
