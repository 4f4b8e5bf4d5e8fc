"""A folder's instructions reach every agent in its chats, like a project's: each turn of a chat in
the folder sends them to the model (the fake model server, over HTTP) beside the agent's own
system prompt; a chat out of the folder, or a deleted folder, sends none."""

import pytest

from agents_app.fake_provider import FakeProvider
from agents_app.services import create_agent
from chats import services

pytestmark = pytest.mark.django_db(transaction=True)

INSTRUCTIONS = "Every price is in euros. Sign each answer with 'Travel desk'."


@pytest.fixture(autouse=True)
def no_retries(settings):
    settings.HUB_MODEL_MAX_RETRIES = 0


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


def test_every_agent_in_a_folders_chat_reads_its_instructions(fake, user, run_now):
    planner = create_agent(owner=user, name="Planner", model="openai:fake-model", base_url=fake.openai_url,
                           system_prompt="You plan trips.")
    booker = create_agent(owner=user, name="Booker", model="openai:fake-model", base_url=fake.openai_url,
                          system_prompt="You book hotels.")
    folder = services.create_folder(owner=user, name="Travel", instructions=INSTRUCTIONS)
    chat = services.create_chat(owner=user, title="Lisbon", agents=[planner, booker])
    services.move_chat(chat=chat, folder=folder)

    services.send_message(chat=chat, content="Three days in Lisbon?")
    assert run_now() == ["succeeded", "succeeded"]
    systems = sorted(request.system for request in fake.requests)
    assert len(systems) == 2
    for system, prompt in zip(systems, ("You book hotels.", "You plan trips."), strict=True):
        assert system.startswith(prompt) and INSTRUCTIONS in system
    assert INSTRUCTIONS not in fake.requests[0].prompt  # instructions, not the user's words


def test_changed_instructions_apply_from_the_next_turn_and_leave_with_the_folder(fake, user, run_now):
    agent = create_agent(owner=user, name="Helper", model="openai:fake-model", base_url=fake.openai_url)
    folder = services.create_folder(owner=user, name="Work", instructions="Answer in French.")
    chat = services.move_chat(chat=services.create_chat(owner=user, title="Notes", agents=[agent]), folder=folder)

    services.send_message(chat=chat, content="first")
    services.update_folder(folder=folder, instructions="Answer in German.")
    run_now()
    services.send_message(chat=chat, content="second")
    run_now()
    services.move_chat(chat=chat, folder=None)
    services.send_message(chat=chat, content="third")
    run_now()
    other = services.create_chat(owner=user, title="Elsewhere", agents=[agent])
    services.send_message(chat=other, content="fourth")
    run_now()

    systems = [request.system for request in fake.requests]
    assert len(systems) == 4
    assert "Answer in German." in systems[0] and "Answer in German." in systems[1]  # read when the turn runs
    assert not any("Answer in" in system for system in systems[2:])
