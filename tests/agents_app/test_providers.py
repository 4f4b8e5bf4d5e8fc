"""Real provider clients (pydantic-ai's OpenAI and Anthropic models) against the fake model server.

Every turn goes the way a user's does: create_agent, send_message, a worker executing the run. The
fake server is a real HTTP server on 127.0.0.1, so streaming, retries and errors are the SDKs' own.
"""

import json
import logging

import pytest

from agents_app import providers, secrets
from agents_app.fake_provider import Answer, FakeProvider, ToolCall
from agents_app.models import Agent, Run
from agents_app.services import create_agent
from chats import events
from chats.models import ContextBlock, Message
from chats.services import send_message
from hub.errors import InvalidInput

pytestmark = pytest.mark.django_db(transaction=True)

ENV_KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_BASE_URL",
            "OLLAMA_API_KEY")


@pytest.fixture(autouse=True)
def _clean_provider_environment(monkeypatch, settings):
    """No key or base URL from the developer's shell, and no SDK retries unless a test asks."""
    for name in ENV_KEYS:
        monkeypatch.delenv(name, raising=False)
    settings.HUB_MODEL_MAX_RETRIES = 0


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


@pytest.fixture
def sent_events(monkeypatch):
    """Every event sent to browsers during the test (deltas as the worker streams them)."""
    from chats.streams import replay_buffer

    sent = []
    original, buffer = events.relay, replay_buffer()
    original_stream = buffer.stream_many

    def record(group, batch):
        # Embedded, deltas come through here as well.
        sent.extend(event for event in batch if event["type"] != events.MESSAGE_DELTA)
        original(group, batch)

    def record_stream(batch):
        for *_, deltas in batch:
            sent.extend(deltas)
        original_stream(batch)

    monkeypatch.setattr(events, "relay", record)
    monkeypatch.setattr(buffer, "stream_many", record_stream)
    return sent


@pytest.fixture
def agent_on(user):
    def make(base_url, model="openai:fake-model", **fields):
        return create_agent(owner=user, name=fields.pop("name", "Faker"), model=model, base_url=base_url, **fields)

    return make


def ask(agent, content="Ada"):
    return send_message(chat=agent.main_chat, content=content)


def reply_of(agent) -> Message:
    return Message.objects.get(sender_agent=agent, kind="message")


# --- Streaming ------------------------------------------------------------------------------

def test_streamed_text_becomes_the_reply(fake, agent_on, run_now, sent_events):
    fake.script(text="Hello {prompt}, this answer came in small pieces.", chunk_size=5)
    agent = agent_on(fake.openai_url, system_prompt="Be brief.")
    trigger = ask(agent, "Ada")

    assert run_now() == ["succeeded"]
    reply = reply_of(agent)
    assert reply.status == "final" and reply.content == "Hello Ada, this answer came in small pieces."
    deltas = [e for e in sent_events if e["type"] == "message.delta" and e["message_id"] == reply.pk]
    assert len(deltas) >= 1 and "".join(d["text"] for d in deltas) == reply.content
    request = fake.requests[0]
    assert request.stream and request.model == "fake-model"
    assert request.prompt == "Ada" and "Be brief." in request.system
    assert Run.objects.get(trigger_message=trigger).status == "succeeded"


def test_the_model_sees_the_conversation_so_far(fake, agent_on, run_now):
    fake.script(text="Reply to {prompt}")
    agent = agent_on(fake.openai_url)
    ask(agent, "first question")
    run_now()
    ask(agent, "second question")
    run_now()

    second = fake.requests[-1].messages
    spoken = [(m["role"], m["content"]) for m in second if m["role"] in ("user", "assistant")]
    assert spoken == [("user", "first question"), ("assistant", "Reply to first question"),
                      ("user", "second question")]


def test_reasoning_streams_beside_the_answer(fake, agent_on, run_now, sent_events):
    fake.script(reasoning="The user wants a greeting.", text="Hi!", chunk_size=4)
    agent = agent_on(fake.openai_url)
    ask(agent)

    assert run_now() == ["succeeded"]
    reply = reply_of(agent)
    assert reply.content == "Hi!"
    assert reply.data["reasoning"] == "The user wants a greeting."
    streamed = "".join(e["text"] for e in sent_events if e["type"] == "message.delta" and e["part"] == "reasoning")
    assert streamed == "The user wants a greeting."


def test_a_tool_call_runs_the_hub_tool_once_and_the_model_then_answers(fake, agent_on, run_now, user):
    fake.script(tool_calls=[ToolCall("record_effect", {"key": "from-the-model"})], text="I recorded it.",
                chunk_size=6)
    agent = agent_on(fake.openai_url, tools=["record_effect"])
    ask(agent, "please record")

    assert run_now() == ["succeeded"]
    assert ContextBlock.objects.get(owner=user, label="effects").content == "from-the-model\n"
    assert reply_of(agent).content == "I recorded it."
    first, second = fake.requests
    assert [t["function"]["name"] for t in first.body["tools"]] == ["record_effect"]
    tool_results = [m for m in second.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_results] == [("call_0", "recorded from-the-model")]
    assert Message.objects.filter(kind="log", subkind="tool").count() == 1


# --- Keys -----------------------------------------------------------------------------------

def test_the_owners_own_key_is_sent(fake, agent_on, run_now, user, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-wide-key-0000")
    secrets.store_key(owner=user, provider="openai", key="sk-alice-own-key-1234")
    agent = agent_on(fake.openai_url)
    ask(agent)

    assert run_now() == ["succeeded"]
    assert fake.requests[0].headers["authorization"] == "Bearer sk-alice-own-key-1234"


def test_the_servers_key_is_sent_to_the_servers_base_url_when_the_owner_has_none(fake, agent_on, run_now,
                                                                                 monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-wide-key-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    agent = agent_on(fake.openai_url + "/")  # the server's own base URL, written another way
    ask(agent)

    assert run_now() == ["succeeded"]
    assert fake.requests[0].headers["authorization"] == "Bearer sk-server-wide-key-0000"


def test_openai_base_url_from_the_environment(fake, agent_on, run_now, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-wide-key-0000")
    agent = agent_on("")
    ask(agent)

    assert run_now() == ["succeeded"]
    assert len(fake.requests) == 1


def test_turns_share_the_workers_connection_to_the_servers_model_endpoint(fake, agent_on, run_now, monkeypatch):
    """A turn opens no connection (and TLS handshake) of its own before its first token: the
    worker's turns reuse its open connection to the server's endpoint."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-wide-key-0000")
    first, second = agent_on("", name="One"), agent_on("", name="Two")
    for agent in (first, second, first):
        ask(agent)
        assert run_now() == ["succeeded"]
    assert len(fake.requests) == 3
    assert len({request.connection for request in fake.requests}) == 1


def test_a_refused_key_is_reported_and_never_shown(fake, agent_on, run_now, user, sent_events, caplog):
    # The fake echoes the key it refused in its 401 body, as some providers do.
    fake.api_key = "sk-the-only-valid-key"
    bad_key = "sk-alice-mistyped-key-98765"
    secrets.store_key(owner=user, provider="openai", key=bad_key)
    agent = agent_on(fake.openai_url)
    ask(agent)

    with caplog.at_level(logging.DEBUG):
        assert run_now() == ["failed"]
    reply = reply_of(agent)
    assert reply.data["error"] == "The model provider refused the API key."
    stored = json.dumps([list(Message.objects.values()), list(Run.objects.values("error", "checkpoint"))],
                        default=str)
    assert bad_key not in stored
    assert bad_key not in json.dumps(sent_events, default=str)
    assert bad_key not in caplog.text
    assert fake.requests[0].api_key == bad_key  # it went to the provider, and only there


def test_no_key_for_openai_itself_fails_the_turn_with_a_reason(agent_on, run_now):
    agent = agent_on("", model="openai:gpt-4.1-mini")
    trigger = ask(agent)

    assert run_now() == ["failed"]
    reply = reply_of(agent)
    assert reply.status == "error" and "No OpenAI API key is set" in reply.data["error"]
    assert Message.objects.get(pk=trigger.pk).content == "Ada"


# --- Errors ---------------------------------------------------------------------------------

ERRORS = [
    (401, "The model provider refused the API key."),
    (429, "The model provider is rate-limiting requests; try again shortly."),
    (500, "The model provider had an internal error (HTTP 500); try again shortly."),
    ("drop", "The connection to the model server at 127.0.0.1:{port} broke off during the answer."),
    ("garbage", "The model server sent an answer Hub could not read."),
]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize(("error", "sentence"), ERRORS, ids=[str(e[0]) for e in ERRORS])
def test_each_error_fails_the_run_with_a_readable_reason(fake, agent_on, run_now, api, error, sentence):
    fake.script(error=error, text="This answer is cut off halfway through, sadly.", chunk_size=4, drop_after=3)
    agent = agent_on(*_endpoint(fake, api))
    trigger = ask(agent, "my question")

    assert run_now() == ["failed"]
    reply = reply_of(agent)
    expected = sentence.format(port=fake.port)
    assert reply.status == "error" and reply.data["error"] == expected
    assert Run.objects.get(trigger_message=trigger).error == expected
    assert Message.objects.get(pk=trigger.pk).content == "my question"


def _endpoint(fake, api):
    return (fake.openai_url, "openai:fake-model") if api == "openai" else (fake.url, "anthropic:fake-claude")


def test_an_unreachable_server_is_named(agent_on, run_now):
    agent = agent_on("http://127.0.0.1:1/v1")
    ask(agent)

    assert run_now() == ["failed"]
    assert reply_of(agent).data["error"] == "The model server at 127.0.0.1:1 could not be reached."


def test_retries_are_bounded_and_then_fail(fake, agent_on, run_now, settings):
    settings.HUB_MODEL_MAX_RETRIES = 1
    fake.script(error=429)
    agent = agent_on(fake.openai_url)
    ask(agent)

    assert run_now() == ["failed"]
    assert len(fake.requests) == 2
    assert "rate-limiting" in reply_of(agent).data["error"]


def test_a_passing_server_error_is_retried_and_the_user_gets_the_reply(fake, agent_on, run_now, settings):
    settings.HUB_MODEL_MAX_RETRIES = 1
    fake.script(text="Worked the second time.")
    fake.queue(Answer(error=500))
    agent = agent_on(fake.openai_url)
    ask(agent)

    assert run_now() == ["succeeded"]
    assert reply_of(agent).content == "Worked the second time."


def test_a_model_hub_does_not_know_fails_with_its_name(fake, agent_on, run_now):
    agent = agent_on(fake.openai_url)
    Agent.objects.filter(pk=agent.pk).update(model="mystery:model")  # a row saved before validation
    ask(agent)

    assert run_now() == ["failed"]
    assert reply_of(agent).data["error"] == "Hub does not know the model 'mystery:model'."


# --- Other providers ------------------------------------------------------------------------

def test_anthropic_streams_text_and_thinking(fake, agent_on, run_now, user, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server-key-0000")
    secrets.store_key(owner=user, provider="anthropic", key="sk-ant-alice-key-1234")
    fake.script(reasoning="Thinking about {prompt}.", text="Hello {prompt}, from Claude.", chunk_size=5)
    agent = agent_on(fake.url, model="anthropic:fake-claude", system_prompt="You are terse.")
    ask(agent, "Ada")

    assert run_now() == ["succeeded"]
    reply = reply_of(agent)
    assert reply.content == "Hello Ada, from Claude."
    assert reply.data["reasoning"] == "Thinking about Ada."
    request = fake.requests[0]
    assert request.api == "anthropic" and request.stream and request.model == "fake-claude"
    assert request.api_key == "sk-ant-alice-key-1234"
    assert "You are terse." in request.system


def test_anthropic_tool_call(fake, agent_on, run_now, user, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-server-key-0000")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    fake.script(tool_calls=[ToolCall("record_effect", {"key": "claude"})], text="Done.")
    agent = agent_on(f"{fake.url}/v1", model="anthropic:fake-claude", tools=["record_effect"])
    ask(agent)

    assert run_now() == ["succeeded"]
    assert ContextBlock.objects.get(owner=user, label="effects").content == "claude\n"
    assert reply_of(agent).content == "Done."
    assert fake.requests[0].api_key == "sk-ant-server-key-0000"


def test_ollama_by_name(fake, agent_on, run_now, monkeypatch):
    monkeypatch.setenv("OLLAMA_BASE_URL", fake.openai_url)
    fake.script(text="Local answer.")
    agent = agent_on("", model="ollama:llama3.2")
    ask(agent)

    assert run_now() == ["succeeded"]
    assert reply_of(agent).content == "Local answer."
    assert fake.requests[0].model == "llama3.2"


# --- Validation -----------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "base_url", "field"), [
    ("gpt-4.1", "", "model"),
    ("openai:", "", "model"),
    ("open ai:gpt", "", "model"),
    ("mistral:large", "", "model"),
    ("builtin:oracle", "", "model"),
    ("test:echo", "", "model"),
    ("openai:fake", "ftp://127.0.0.1/v1", "base_url"),
    ("openai:fake", "127.0.0.1:8901/v1", "base_url"),
    ("openai:fake", "http://user:sk-secret@127.0.0.1/v1", "base_url"),
    ("openai:fake", "http://127.0.0.1:port/v1", "base_url"),
])
def test_a_model_hub_cannot_use_is_refused_with_the_field(model, base_url, field):
    with pytest.raises(InvalidInput) as refused:
        providers.validate_agent_model(model, base_url)
    assert list(refused.value.fields) == [field]


@pytest.mark.parametrize(("model", "base_url"), [
    ("openai:gpt-4.1-mini", ""),
    ("openai:anthropic/claude-3.5-sonnet", "https://openrouter.ai/api/v1"),
    ("ollama:llama3.2:latest", "http://127.0.0.1:11434/v1"),
    ("anthropic:claude-sonnet-4-5", ""),
    ("builtin:librarian", ""),
    ("test:scripted", ""),
])
def test_models_hub_can_run_are_accepted(model, base_url):
    providers.validate_agent_model(model, base_url)


def test_scrub_removes_keys_a_provider_echoes():
    text = 'Incorrect API key provided: sk-proj-abcdef123456. header Authorization: Bearer abc.def api_key="xyz987"'
    clean = providers.scrub(text)
    assert "abcdef123456" not in clean and "abc.def" not in clean and "xyz987" not in clean


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_request_that_does_not_stream_gets_the_whole_answer(fake, agent_on, user, api):
    from pydantic_ai import Agent as ModelAgent

    fake.script(reasoning="Hmm.", tool_calls=[ToolCall("shout", {"word": "hi"})], text="Shouted {prompt}.")
    base_url, model = _endpoint(fake, api)
    model_agent = ModelAgent(providers.build_model(agent_on(base_url, model=model), owner_id=user.pk))
    model_agent.tool_plain(lambda word: word.upper(), name="shout")

    result = model_agent.run_sync("Ada")
    assert result.output == "Shouted Ada."
    assert [r.stream for r in fake.requests] == [False, False]
    thinking = [p.content for m in result.all_messages() for p in m.parts if p.part_kind == "thinking"]
    assert thinking == ["Hmm.", "Hmm."]
