import pytest

from agents_app.models import Run
from chats import services
from chats.models import ContextBlock, Message

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_user_message_gets_one_streamed_reply(scripted_agent, run_now):
    agent = scripted_agent()
    chat = agent.main_chat
    trigger = services.send_message(chat=chat, content="Ada")
    run = Run.objects.get(trigger_message=trigger)
    assert run.status == "queued" and run.kind == "reply"
    assert run_now() == ["succeeded"]
    run.refresh_from_db()
    reply = run.reply_message
    assert reply.content == "Hello Ada, nice to meet you."
    assert reply.status == "final" and reply.sender_agent == agent
    assert run.status == "succeeded" and run.checkpoint == {}


def test_tools_run_once_and_are_logged(scripted_agent, run_now, user):
    agent = scripted_agent(tools=[("record_effect", {"key": "k1"}), ("record_effect", {"key": "k2"})])
    services.send_message(chat=agent.main_chat, content="go")
    assert run_now() == ["succeeded"]
    assert ContextBlock.objects.get(owner=user, label="effects").content == "k1\nk2\n"
    logs = Message.objects.filter(kind="log", subkind="tool").order_by("id")
    assert [m.data["args"]["key"] for m in logs] == ["k1", "k2"]


def test_a_reply_keeps_the_models_usage_for_each_request(scripted_agent, run_now):
    plain = scripted_agent(name="Plain", reply="Short answer.")
    services.send_message(chat=plain.main_chat, content="go")
    with_tool = scripted_agent(name="Tooled", reply="Done.", tools=[("record_effect", {"key": "k"})])
    services.send_message(chat=with_tool.main_chat, content="go")
    assert run_now() == ["succeeded", "succeeded"]
    plain_usage = Run.objects.get(agent=plain).usage
    assert plain_usage["requests"] == 1 and plain_usage["output_tokens"] > 0 and plain_usage["input_tokens"] > 0
    assert Run.objects.get(agent=with_tool).usage["requests"] == 2  # the tool call, then the answer


def test_a_model_calling_a_tool_it_was_not_offered_is_told_so_and_still_answers(scripted_agent, run_now):
    # Models sometimes call a tool when none is offered: the agent has none, the script calls one.
    agent = scripted_agent(reply="Plain answer.", tools=[("look_up_weather", {"city": "Oslo"})])
    assert agent.tools == []
    trigger = services.send_message(chat=agent.main_chat, content="weather?")
    assert run_now() == ["succeeded"]
    run = Run.objects.get(trigger_message=trigger)
    assert run.reply_message.content == "Plain answer." and run.reply_message.status == "final"
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1
    (log,) = Message.objects.filter(kind="log", subkind="tool")  # the thread shows what the model tried
    assert "look_up_weather" in log.content and "Unknown tool name" in log.content


def lose_lease(run):
    """What a SIGKILLed worker leaves behind: a running run whose lease has expired."""
    from datetime import timedelta

    from django.utils import timezone

    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_recovery_continues_into_the_same_message(scripted_agent, run_now):
    from agents_app.turns import recovery, runs
    agent = scripted_agent(reply="The quick brown fox jumps over the lazy dog.")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    # A worker takes the run, streams part of the reply, checkpoints, and dies.
    token = runs.claim(run.pk)
    reply = services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    Run.objects.filter(pk=run.pk).update(reply_message=reply)
    runs.save_checkpoint(run.pk, token, {"text": "The quick brown"})
    lose_lease(run)

    assert recovery.sweep() == {"recovered": 1, "resent": 0}
    run.refresh_from_db()
    reply.refresh_from_db()
    assert run.status == "recovered" and run.checkpoint == {}
    assert reply.status == "interrupted" and reply.content == "The quick brown"
    continuation = Run.objects.get(continues=run)
    assert continuation.kind == "continue" and continuation.attempt == 2
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "The quick brown fox jumps over the lazy dog."
    assert reply.status == "final"
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1


def test_a_turn_that_produced_nothing_is_retried(scripted_agent, run_now):
    from agents_app.turns import recovery, runs
    agent = scripted_agent(reply="fresh")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    runs.claim(run.pk)
    lose_lease(run)
    recovery.sweep()
    retry = Run.objects.get(continues=run)
    assert retry.kind == "reply" and retry.attempt == 2
    assert run_now() == ["succeeded"]
    assert Message.objects.get(sender_agent=agent, kind="message").content == "fresh"


def test_recoveries_are_bounded(scripted_agent, settings):
    from agents_app.turns import recovery, runs
    settings.HUB_MAX_RECOVERIES = 2
    agent = scripted_agent()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    for _ in range(3):
        token = runs.claim(run.pk)
        runs.save_checkpoint(run.pk, token, {"text": "Hel"})
        lose_lease(run)
        recovery.sweep()
        run = runs.latest_in_chain(run)
    assert run.status == "failed" and "interrupted 3 times" in run.error
    assert not Run.objects.filter(status__in=["queued", "running"]).exists()


def test_regenerate_and_continue_reuse_the_reply(scripted_agent, run_now):
    from agents_app import services as agent_services

    agent = scripted_agent(reply="Answer to {prompt}.")
    services.send_message(chat=agent.main_chat, content="life")
    run_now()
    reply = Message.objects.get(sender_agent=agent, kind="message")
    agent_services.regenerate(message=reply)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "Answer to life." and reply.data["versions"][0]["content"] == "Answer to life."
    Message.objects.filter(pk=reply.pk).update(content="Answer", status="interrupted")
    agent_services.continue_last_turn(chat=agent.main_chat, agent=agent)
    assert run_now() == ["succeeded"]
    reply.refresh_from_db()
    assert reply.content == "Answer to life."
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1


def test_a_failing_model_fails_the_run_with_a_reason_and_keeps_the_question(scripted_agent, run_now):
    agent = scripted_agent(fail="upstream exploded")
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now() == ["failed"]
    reply = Message.objects.get(sender_agent=agent, kind="message")
    assert reply.status == "error" and "upstream exploded" in reply.data["error"]
    assert Message.objects.filter(pk=trigger.pk).exists()
    assert Run.objects.get(trigger_message=trigger).status == "failed"


def test_a_duplicate_delivery_does_nothing(scripted_agent, run_now):
    from agents_app.turns.execution import execute_run

    agent = scripted_agent()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    assert run_now() == ["succeeded"]
    assert execute_run(run.pk) == "skipped"
    assert execute_run("00000000-0000-0000-0000-000000000000") == "missing"
    assert Message.objects.filter(sender_agent=agent, kind="message").count() == 1


def run_in_thread(run_id):
    import threading

    from django.db import close_old_connections

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


def wait_for(predicate, timeout=10.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_cancel_stops_within_a_second_and_keeps_the_partial_text(scripted_agent):
    import time

    from agents_app import services as agent_services
    from chats.streams import replay_buffer

    agent = scripted_agent(reply="word " * 200, chunk=5, delay=0.02)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    thread, outcome = run_in_thread(run.pk)
    assert wait_for(lambda: Run.objects.get(pk=run.pk).reply_message_id is not None)
    reply_id = Run.objects.get(pk=run.pk).reply_message_id
    assert wait_for(lambda: len(replay_buffer().read(reply_id)["text"]) > 20)
    asked = time.monotonic()
    assert agent_services.cancel_run(run=Run.objects.get(pk=run.pk)) is True
    thread.join(5)
    assert time.monotonic() - asked < 1.0
    assert outcome["value"] == "cancelled"
    reply = Message.objects.get(pk=reply_id)
    assert reply.status == "cancelled"
    assert 20 < len(reply.content) < len("word " * 200)
    assert Run.objects.get(pk=run.pk).status == "cancelled"


def test_a_stalled_stream_is_recovered_like_a_lost_one(scripted_agent, settings, run_now):
    settings.HUB_STALL_SECONDS = 0.5
    agent = scripted_agent(reply="abcdefghij", chunk=2, stall_after=4)
    trigger = services.send_message(chat=agent.main_chat, content="x")
    assert run_now(limit=1) == ["stalled"]
    first = Run.objects.get(trigger_message=trigger, continues__isnull=True)
    assert first.status == "recovered" and first.history[-1]["reason"] == "stalled"
    continuation = Run.objects.get(continues=first)
    assert continuation.kind == "continue"
    assert continuation.checkpoint["text"] == "abcd"
    agent.settings["script"].pop("stall_after")
    agent.save()
    assert run_now() == ["succeeded"]
    assert Message.objects.get(sender_agent=agent, kind="message").content == "abcdefghij"


def test_delegation_runs_the_child_as_its_own_durable_run(scripted_agent, user):
    child = scripted_agent(name="Researcher", reply="The answer is 42.", reply_policy="never")
    parent = scripted_agent(name="Lead", reply="Researcher says so.",
                            tools=[("ask_agent", {"agent": "Researcher", "question": "What is it?"})])
    chat = services.create_chat(owner=user, title="Team", agents=[parent, child])
    services.send_message(chat=chat, content="go")
    parent_run = Run.objects.get(agent=parent)
    thread, outcome = run_in_thread(parent_run.pk)
    assert wait_for(lambda: Run.objects.filter(agent=child, kind="delegate").exists())
    child_run = Run.objects.get(agent=child, kind="delegate")
    assert child_run.parent_id == parent_run.pk and child_run.parent_tool_call_id == "ask_agent-0"
    child_thread, child_outcome = run_in_thread(child_run.pk)
    child_thread.join(10)
    thread.join(10)
    assert child_outcome["value"] == "succeeded" and outcome["value"] == "succeeded"
    step = Message.objects.get(kind="log", subkind="tool", sender_agent=parent)
    assert step.data["result"] == "The answer is 42."
    assert Message.objects.get(sender_agent=parent, kind="message").content == "Researcher says so."


def test_programmatic_chat_streams_to_callbacks(scripted_agent):
    import threading

    from agents_app import services as agent_services
    from agents_app.turns.execution import execute_run

    agent = scripted_agent(reply="Streaming {prompt} to code.", chunk=3, delay=0.01)

    def worker():
        from django.db import close_old_connections

        try:
            assert wait_for(lambda: Run.objects.filter(status="queued").exists())
            execute_run(Run.objects.get(status="queued").pk)
        finally:
            close_old_connections()

    thread = threading.Thread(target=worker)
    thread.start()
    deltas, done = [], []
    reply = agent_services.chat(agent, "bytes", on_event=lambda e: deltas.append(e), on_done=done.append)
    thread.join(10)
    assert reply.content == "Streaming bytes to code." and done == [reply]
    assert "".join(e["text"] for e in deltas) == reply.content
    assert [e["offset"] for e in deltas] == sorted(e["offset"] for e in deltas)


def test_a_paced_stream_sends_each_piece_as_it_comes(scripted_agent, run_now, monkeypatch):
    """A piece after a quiet moment is not held back for a batch: a model sending a piece every
    30 ms has each one sent to the chat's tabs alone (a fixed 50 ms window put two in many)."""
    from chats import streams

    buffer = streams.replay_buffer()
    sent = []

    def stream_many(batch, original=buffer.stream_many):
        sent.extend(delta for *_, deltas in batch for delta in deltas)
        original(batch)

    monkeypatch.setattr(buffer, "stream_many", stream_many)
    agent = scripted_agent(reply="abcd" * 20, chunk=4, delay=0.03)
    services.send_message(chat=agent.main_chat, content="go")
    assert run_now() == ["succeeded"]
    assert "".join(delta["text"] for delta in sent) == "abcd" * 20
    single = [delta for delta in sent if len(delta["text"]) == 4]
    assert len(single) >= 0.9 * len(sent), [len(delta["text"]) for delta in sent]
    assert all(delta["model_at"] <= delta["sent_at"] for delta in sent)


def test_programmatic_chat_reports_errors(scripted_agent):
    import threading

    from agents_app import services as agent_services
    from agents_app.turns.execution import execute_run

    agent = scripted_agent(fail="no model here")

    def worker():
        from django.db import close_old_connections

        try:
            assert wait_for(lambda: Run.objects.filter(status="queued").exists())
            execute_run(Run.objects.get(status="queued").pk)
        finally:
            close_old_connections()

    thread = threading.Thread(target=worker)
    thread.start()
    errors = []
    agent_services.chat(agent, "hi", on_error=errors.append)
    thread.join(10)
    assert len(errors) == 1 and "no model here" in str(errors[0])
    thread = threading.Thread(target=worker)
    thread.start()
    with pytest.raises(agent_services.TurnFailed):
        agent_services.chat(agent, "again")
    thread.join(10)


def test_terminal_states_never_change():
    from agents_app.turns import runs
    for terminal in ["succeeded", "failed", "cancelled", "recovered"]:
        for target in ["running", "queued", "succeeded"]:
            with pytest.raises(runs.IllegalTransition):
                runs.check_transition(terminal, target)


def test_a_checkpoint_keeps_the_tool_steps_the_tool_wrapper_stored(scripted_agent):
    from agents_app.turns import runs
    agent = scripted_agent()
    run = Run.objects.get(trigger_message=services.send_message(chat=agent.main_chat, content="x"))
    token = runs.claim(run.pk)
    step = {"id": "c1", "name": "remember", "args": {}, "result": "ok", "at": 1.0}
    Run.objects.filter(pk=run.pk).update(checkpoint={"text": "before", "tool_steps": {"c1": step}})
    assert runs.save_checkpoint(run.pk, token, {"text": "after the tool"}) is True
    run.refresh_from_db()
    assert run.checkpoint == {"text": "after the tool", "tool_steps": {"c1": step}}


def test_a_worker_that_lost_its_lease_writes_nothing(scripted_agent):
    from agents_app.turns import runs
    agent = scripted_agent()
    trigger = services.send_message(chat=agent.main_chat, content="x")
    run = Run.objects.get(trigger_message=trigger)
    token = runs.claim(run.pk)
    assert runs.claim(run.pk) is None  # a second claim of a running run fails
    stale = "00000000-0000-0000-0000-000000000001"
    assert runs.save_checkpoint(run.pk, stale, {"text": "intruder"}) is False
    assert runs.heartbeat(run.pk, stale) is False
    assert runs.finish(run.pk, stale, "succeeded") is False
    assert runs.save_checkpoint(run.pk, token, {"text": "mine"}) is True
    run.refresh_from_db()
    assert run.checkpoint == {"text": "mine", "tool_steps": {}} and run.status == "running"


def test_a_checkpoint_stores_the_reply_text_with_it_and_a_lost_lease_stores_neither(scripted_agent):
    """The turn's checkpoint carries the reply's text (one statement on PostgreSQL): a page that
    reloads mid-stream shows it, and a worker that lost its lease changes neither row."""
    from agents_app.turns import runs
    agent = scripted_agent()
    run = Run.objects.get(trigger_message=services.send_message(chat=agent.main_chat, content="x"))
    token = runs.claim(run.pk)
    reply = services.start_reply(chat=run.chat, agent=agent, thread=None, run=run)
    for text in ("Hel", "Hello, wor"):  # a later checkpoint replaces the text
        assert runs.save_checkpoint(run.pk, token, {"text": text}, counts={"deltas": 2, "checkpoints": 1},
                                    reply=(reply.pk, text, "thinking", {"kept": True})) is True
    stale = "00000000-0000-0000-0000-000000000001"
    assert runs.save_checkpoint(run.pk, stale, {"text": "intruder"},
                                reply=(reply.pk, "intruder", "", {})) is False

    run.refresh_from_db()
    reply.refresh_from_db()
    assert run.checkpoint["text"] == "Hello, wor" and (run.delta_count, run.checkpoint_count) == (2, 1)
    assert reply.content == "Hello, wor" and reply.data == {"kept": True, "reasoning": "thinking"}


def test_a_worker_starts_two_turns_at_a_time_and_answers_them_all(scripted_agent, monkeypatch):
    # The rest wait their turn (agents_app.turns.execution.TURN_BOOKKEEPING), so that a burst of new turns
    # does not take the GIL from the model loop streaming the replies already running.
    import threading
    import time

    from agents_app.turns.execution import Turn

    inside, most = [0], [0]
    lock = threading.Lock()
    prepare = Turn.prepare

    def counted_prepare(turn):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.2)  # long enough for every thread to arrive while others prepare
            prepare(turn)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(Turn, "prepare", counted_prepare)
    agents = [scripted_agent(name=f"Scribe{n}") for n in range(6)]
    triggers = [services.send_message(chat=agent.main_chat, content=f"to {n}") for n, agent in enumerate(agents)]
    started = [run_in_thread(Run.objects.get(trigger_message=trigger).pk) for trigger in triggers]
    for thread, _ in started:
        thread.join(30)

    assert [outcome.get("value") for _, outcome in started] == ["succeeded"] * 6
    assert most[0] == 2
    for n, agent in enumerate(agents):
        (reply,) = Message.objects.filter(chat=agent.main_chat, sender_agent=agent)
        assert reply.content == f"Hello to {n}, nice to meet you."


def _run_at_once(run_ids) -> list[str]:
    """Execute these runs at the same time, each on a thread of its own, as a worker's threads do."""
    started = [run_in_thread(run_id) for run_id in run_ids]
    for thread, _ in started:
        thread.join(60)
    return [outcome.get("value") for _, outcome in started]


def test_turns_streaming_at_once_share_the_checkpoint_budget_and_one_alone_checkpoints_as_before(
        scripted_agent, settings):
    """The process's streaming turns write at most HUB_CHECKPOINTS_PER_SECOND checkpoints a second
    in all: eight at once with four a second between them checkpoint every two seconds each, while
    one alone checkpoints every 250 ms. Every reply is whole either way."""
    settings.HUB_CHECKPOINTS_PER_SECOND = 4
    reply = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWX"  # 60 pieces of one character: 3 s

    alone = scripted_agent(name="Alone", reply=reply, chunk=1, delay=0.05)
    services.send_message(chat=alone.main_chat, content="go")
    assert _run_at_once([Run.objects.get(agent=alone).pk]) == ["succeeded"]

    together = [scripted_agent(name=f"Together{n}", reply=reply, chunk=1, delay=0.05) for n in range(8)]
    for agent in together:
        services.send_message(chat=agent.main_chat, content="go")
    assert _run_at_once([Run.objects.get(agent=agent).pk for agent in together]) == ["succeeded"] * 8

    assert Run.objects.get(agent=alone).checkpoint_count >= 6  # about twelve
    assert [Run.objects.get(agent=agent).checkpoint_count <= 2 for agent in together] == [True] * 8  # about one
    for agent in [alone, *together]:
        assert Message.objects.get(sender_agent=agent, kind="message").content == reply
