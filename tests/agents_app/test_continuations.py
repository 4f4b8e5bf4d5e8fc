"""Continuations never repeat text: Hub's own Librarian sends only what is missing; a language model
is asked by prefix or by instruction, and whatever it sends, the reply holds its partial text once,
with a seam where a new word starts.

Interruptions are real: a stream that stalls (the fake model server stops sending) is recovered by
the turn's own watchdog, or a turn whose worker lost its lease is recovered like a dead worker's.
"""

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone

from agents_app import librarian
from agents_app import services as agent_services
from agents_app.continuations import ContinuationText
from agents_app.fake_provider import Answer, FakeProvider
from agents_app.models import Agent, Run
from agents_app.scripted import CONTINUE_PROMPT
from agents_app.turns import recovery, runs
from chats import events, services
from chats.models import Message
from chats.streams import replay_buffer

pytestmark = pytest.mark.django_db(transaction=True)

FULL = "The quick brown fox jumps over the lazy dog."
ENV_KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch, settings):
    for name in ENV_KEYS:
        monkeypatch.delenv(name, raising=False)
    settings.HUB_MODEL_MAX_RETRIES = 0


@pytest.fixture
def fake():
    with FakeProvider() as server:
        yield server


@pytest.fixture
def model_agent(user, fake):
    def make(api="openai", **settings_):
        model, base_url = ("openai:fake-model", fake.openai_url) if api == "openai" else ("anthropic:fake-claude",
                                                                                          fake.url)
        return agent_services.create_agent(owner=user, name="Writer", model=model, base_url=base_url,
                                           settings=settings_)

    return make


@pytest.fixture
def streamed(monkeypatch):
    """The text deltas the worker streams to the chat's tabs, by message id."""
    buffer = replay_buffer()
    original = buffer.stream_many
    sent: dict[int, list[dict]] = {}

    def record(batch):
        for *_, deltas in batch:
            for delta in deltas:
                if delta["part"] == "text":
                    sent.setdefault(delta["message_id"], []).append(delta)
        original(batch)

    monkeypatch.setattr(buffer, "stream_many", record)
    return sent


def reply_of(agent) -> Message:
    return Message.objects.get(sender_agent=agent, kind="message")


def interrupted(agent, partial: str) -> Message:
    """A turn whose worker died after checkpointing partial, recovered as the sweeper does it."""
    trigger = services.send_message(chat=agent.main_chat, content="Tell me about the fox")
    run = Run.objects.get(trigger_message=trigger)
    token = runs.claim(run.pk)
    reply = services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    assert runs.save_checkpoint(run.pk, token, {"text": partial})
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert recovery.recover_run(run.pk, reason="worker lost") is not None
    reply.refresh_from_db()
    assert reply.status == "interrupted" and reply.content == partial
    return reply


def stalled(fake, agent, run_now, settings, *, first: Answer, then: list[Answer]) -> Message:
    """The model server stops mid-answer; the turn's watchdog recovers it and the continuation runs.

    Its tests are marked `alone`: under the parallel part's load the half-second watchdog fired
    before the partial text had arrived."""
    settings.HUB_STALL_SECONDS = 0.5
    fake.queue(first, *then)
    services.send_message(chat=agent.main_chat, content="Tell me about the fox")
    assert run_now() == ["stalled", "succeeded"]
    return reply_of(agent)


# --- Prefix continuation ----------------------------------------------------------------------

@pytest.mark.alone
def test_an_openai_compatible_server_set_to_prefix_continues_the_partial_answer(fake, model_agent, run_now,
                                                                               streamed, settings):
    agent = model_agent(continuation="prefix")
    # Three text pieces of five characters, then nothing: "The quick brown".
    reply = stalled(fake, agent, run_now, settings, first=Answer(text=FULL, chunk_size=5, stall_after=3),
                    then=[Answer(text=FULL, chunk_size=5, prefix="honour")])

    assert reply.content == FULL and reply.status == "final"
    continuation = fake.requests[1]
    assert continuation.messages[-1] == {"role": "assistant", "content": "The quick brown"}
    assert continuation.body["continue_final_message"] is True
    assert continuation.body["add_generation_prompt"] is False
    assert CONTINUE_PROMPT not in str(continuation.messages)
    # The tabs got each character once, in order.
    assert "".join(d["text"] for d in streamed[reply.pk]) == FULL
    assert [d["offset"] for d in streamed[reply.pk]] == sorted(d["offset"] for d in streamed[reply.pk])


@pytest.mark.alone
def test_anthropic_is_continued_by_prefill_without_trailing_whitespace(fake, model_agent, run_now, settings):
    agent = model_agent(api="anthropic")
    # message_start, content_block_start, then "The quic" and "k brown ": the partial ends in a space.
    reply = stalled(fake, agent, run_now, settings, first=Answer(text=FULL, chunk_size=8, stall_after=3),
                    then=[Answer(text=FULL, chunk_size=8, prefix="honour")])

    assert len(fake.requests) == 2, "the prefill was refused"
    prefill = fake.requests[1].messages[-1]
    assert prefill["role"] == "assistant"
    assert [block["text"] for block in prefill["content"]] == ["The quick brown"]
    assert reply.content == FULL  # " fox" after "brown ": one space, not two


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_server_that_ignores_the_prefix_and_answers_afresh_is_not_repeated(api, fake, model_agent, run_now,
                                                                           streamed):
    agent = model_agent(api=api, continuation="prefix")
    reply = interrupted(agent, "The quick brown")
    fake.script(text=FULL, chunk_size=4, prefix="ignore")

    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == FULL
    assert "".join(d["text"] for d in streamed[reply.pk]) == " fox jumps over the lazy dog."


def test_a_server_that_refuses_the_prefix_is_asked_by_instruction(fake, model_agent, run_now):
    agent = model_agent(api="anthropic")
    reply = interrupted(agent, "The quick brown")
    fake.queue(Answer(prefix="reject"), Answer(text="fox jumps over the lazy dog."))

    assert run_now() == ["succeeded"]
    refused, asked = fake.requests
    assert refused.messages[-1]["role"] == "assistant"
    assert asked.messages[-1]["role"] == "user" and asked.prompt == CONTINUE_PROMPT
    reply.refresh_from_db()
    assert reply.content == FULL  # a space between "brown" and "fox", as an instruction needs


# --- Instruction continuation -----------------------------------------------------------------

def test_openai_compatible_servers_are_asked_by_instruction_unless_set(fake, model_agent, run_now):
    agent = model_agent()
    reply = interrupted(agent, "The quick brown")
    fake.script(text="fox jumps over the lazy dog.")

    assert run_now() == ["succeeded"]
    request = fake.requests[-1]
    assert request.prompt == CONTINUE_PROMPT
    assert request.messages[-2] == {"role": "assistant", "content": "The quick brown"}
    assert "continue_final_message" not in request.body
    reply.refresh_from_db()
    assert reply.content == FULL


@pytest.mark.parametrize(("partial", "answer", "stored"), [
    ("The quick brown", FULL, FULL),  # the whole answer again
    ("Foxes are fast. The quick brown", "The quick brown fox jumps.", "Foxes are fast. The quick brown fox jumps."),
    ("Facts:\n- Foxes are fast\n- The quick bro", "- The quick brown fox jumps.",
     "Facts:\n- Foxes are fast\n- The quick brown fox jumps."),
    ("The quick brown", "brown fox jumps.", "The quick brown fox jumps."),
])
def test_a_model_that_repeats_the_partial_text_or_its_last_sentence_or_line_has_the_repeat_dropped(
        partial, answer, stored, fake, model_agent, run_now):
    agent = model_agent()
    reply = interrupted(agent, partial)
    fake.script(text=answer, chunk_size=3)

    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == stored


def test_a_continuation_that_ends_while_it_could_still_be_a_repeat_keeps_its_text(fake, model_agent, run_now):
    agent = model_agent()
    reply = interrupted(agent, "The quick brown fox")
    fake.script(text="The")  # not a repeat after all: the answer ends there

    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "The quick brown fox The"


@pytest.mark.parametrize("tools", [[], ["search_messages"]], ids=["plain", "with tools"])
def test_a_reply_whose_whole_text_was_kept_before_the_interruption_ends_as_it_was(
        tools, fake, model_agent, run_now):
    """The worker died after the last words were kept and before the reply was settled: asked to
    go on, the model has nothing to add. The reply is whole; the model is not asked again. (A
    turn with tools runs through pydantic-ai's agent, a plain one through one request.)"""
    agent = model_agent()
    agent.tools = tools
    agent.save(update_fields=["tools"])
    reply = interrupted(agent, FULL)
    fake.script(text="")

    assert run_now() == ["succeeded"]
    assert len(fake.requests) == 1
    reply.refresh_from_db()
    assert reply.status == "final" and reply.content == FULL


# --- The seam ---------------------------------------------------------------------------------

def joined(partial: str, pieces: list[str], *, prefix: bool = False) -> str:
    text = ContinuationText(partial, prefix=prefix)
    return partial + "".join(text.feed(piece) for piece in pieces) + text.end()


@pytest.mark.parametrize(("partial", "pieces", "stored"), [
    ("The quick brown", ["fox jumps."], "The quick brown fox jumps."),
    ("The quick brown", [" fox jumps."], "The quick brown fox jumps."),
    ("The quick brown ", [" fox jumps."], "The quick brown fox jumps."),
    ("The quick brown ", ["fox jumps."], "The quick brown fox jumps."),
    ("It was quick.", ["Then it jumped."], "It was quick. Then it jumped."),
    ("It was over", ["."], "It was over."),
    ("Pi is 3.", ["14"], "Pi is 3.14"),
    ("Facts:\n- foxes", ["- dogs"], "Facts:\n- foxes\n- dogs"),
    ("Some text", ["## Next\nMore"], "Some text\n\n## Next\nMore"),
    ("First paragraph.\n", ["\n\nSecond."], "First paragraph.\n\nSecond."),
    ("狐狸跳过", ["了懒狗。"], "狐狸跳过了懒狗。"),
    ("The quick bro", ["The quick brown fox."], "The quick brown fox."),  # the cut word is finished
    ("This is a", ["a good idea."], "This is a good idea."),  # a repeated word goes
    ("We went to the", ["theatre."], "We went to the theatre."),  # a word that only starts alike stays
])
def test_a_seam_is_kept_where_the_continuation_starts_a_new_word_and_whitespace_is_not_doubled(
        partial, pieces, stored):
    assert joined(partial, pieces) == stored


def test_a_prefix_continuation_is_joined_as_the_model_wrote_it():
    # The model wrote on from the last character: "bro" + "wn" is one word.
    assert joined("The quick bro", ["wn fox."], prefix=True) == "The quick brown fox."
    assert joined("The quick brown", [" fox."], prefix=True) == "The quick brown fox."


def test_the_start_is_held_only_while_it_could_be_a_repeat():
    text = ContinuationText("The quick brown", prefix=False)
    assert text.feed("The qu") == ""  # could be the partial again
    assert text.feed("ick brown fox") == " fox"
    assert text.feed(" jumps.") == " jumps."
    fresh = ContinuationText("The quick brown", prefix=False)
    assert fresh.feed("fox") == " fox"  # cannot be a repeat: let through at once


# --- Hub's own model: the Librarian -------------------------------------------------------------

@pytest.fixture
def librarian_chat(user):
    agent_services.ensure_builtin_agents()  # made by a migration; transactional tests flush it
    agent = Agent.objects.get(owner__isnull=True, model="builtin:librarian")
    return services.create_chat(owner=user, title="Ask the Librarian", agents=[agent]), agent


def execute_in_thread(run_id):
    from agents_app.turns.execution import execute_run

    outcome = {}

    def body():
        try:
            outcome["value"] = execute_run(run_id)
        finally:
            close_old_connections()

    thread = threading.Thread(target=body)
    thread.start()
    return thread, outcome


def wait_for(predicate, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_the_librarian_interrupted_mid_answer_stores_its_answer_once(user, librarian_chat, run_now):
    chat, agent = librarian_chat
    for n in range(20):  # an answer long enough to be cut: twenty chats with previews
        garden = services.create_chat(owner=user, title=f"Garden notes {n:02d}")
        services.send_message(chat=garden, content=f"Entry {n}: the tomatoes need more sun and water this year.")
    trigger = services.send_message(chat=chat, content="list my chats")
    run = Run.objects.get(trigger_message=trigger)
    thread, outcome = execute_in_thread(run.pk)
    assert wait_for(lambda: Run.objects.get(pk=run.pk).reply_message_id is not None)
    reply_id = Run.objects.get(pk=run.pk).reply_message_id
    assert wait_for(lambda: len(replay_buffer().read(reply_id)["text"]) > 100)
    # The worker is lost mid-answer: its lease is taken and has expired, so it can write nothing more.
    Run.objects.filter(pk=run.pk).update(lease_token=uuid.uuid4(),
                                         lease_expires_at=timezone.now() - timedelta(seconds=1))
    thread.join(10)
    assert outcome["value"] == "lease_lost"

    assert recovery.recover_run(run.pk, reason="worker lost") is not None
    reply = Message.objects.get(pk=reply_id)
    partial = reply.content
    assert reply.status == "interrupted" and len(partial) > 100
    assert run_now() == ["succeeded"]

    reply.refresh_from_db()
    (step,) = Message.objects.filter(kind="log", subkind="tool", sender_agent=agent)  # the tool ran once
    whole = librarian.answer("list_chats", {}, step.data["result"])
    assert len(partial) < len(whole)
    assert reply.status == "final" and reply.content == whole
    assert reply.content.count("Your most recent chats") == 1
    assert [r.status for r in runs.runs_from(run.pk)] == ["recovered", "succeeded"]


def test_the_librarian_asked_to_continue_adds_only_what_is_missing(librarian_chat, run_now):
    chat, agent = librarian_chat
    services.send_message(chat=chat, content="hello")
    assert run_now() == ["succeeded"]
    reply = reply_of(agent)
    assert reply.content == librarian.INTRO
    Message.objects.filter(pk=reply.pk).update(content=librarian.INTRO[:40], status="interrupted")

    agent_services.continue_last_turn(chat=chat, agent=agent)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == librarian.INTRO and reply.status == "final"


def test_the_librarian_says_so_when_the_hub_changed_since_its_partial_answer(user, librarian_chat, run_now):
    chat, agent = librarian_chat
    services.create_chat(owner=user, title="Garden")
    services.send_message(chat=chat, content="list my chats")
    assert run_now() == ["succeeded"]
    reply = reply_of(agent)
    partial = reply.content[:60]
    Message.objects.filter(pk=reply.pk).update(content=partial, status="interrupted")
    services.create_chat(owner=user, title="Kitchen")  # listed first from now on

    agent_services.continue_last_turn(chat=chat, agent=agent)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    now = Message.objects.filter(kind="log", subkind="tool", sender_agent=agent).order_by("id").last()
    current = librarian.answer("list_chats", {}, now.data["result"])
    assert "Kitchen" in current and not current.startswith(partial)
    assert reply.content == partial + librarian.CHANGED_NOTE + current


# --- Events stay whole ------------------------------------------------------------------------

def test_a_continuations_deltas_round_trip_through_json(fake, model_agent, run_now, streamed):
    import json

    agent = model_agent()
    reply = interrupted(agent, "The quick brown")
    fake.script(text=FULL, chunk_size=6)
    assert run_now() == ["succeeded"]
    for delta in streamed[reply.pk]:
        assert json.loads(json.dumps(delta)) == delta and delta["type"] == events.MESSAGE_DELTA
    assert streamed[reply.pk][0]["offset"] == len("The quick brown")


def test_an_unknown_continuation_setting_is_refused_naming_it(user):
    from agents_app.services import create_agent
    from hub.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        create_agent(owner=user, name="Typo", model="anthropic:m", settings={"continuation": "prefx"})
    assert list(refused.value.fields) == ["settings.continuation"]
