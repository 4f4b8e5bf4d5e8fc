"""SIGKILL a real worker mid-reply in a temporary chat: the turn recovers from the checkpoint kept
in the chat's image (in Redis), as in a stored chat, and nothing reaches the database."""

import pytest

from agents_app.models import Run
from agents_app.scripted import full_reply
from chats import services as chat_services
from chats.models import Message
from chats.temporary.scope import inside
from tests.chaos import scenarios

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.needs_redis,
    pytest.mark.needs_postgres,
    pytest.mark.django_db(transaction=True),
]

TURNS = 4  # a turn that ends before its kill moment is followed by another


@pytest.mark.timeout(240)
def test_sigkill_mid_reply_in_a_temporary_chat_leaves_one_full_reply_and_each_effect_once(make_cluster, user, rng,
                                                                                        chaos_counts):
    cluster = make_cluster()
    cluster.start_beat()
    cluster.start_workers(2, pool="threads", concurrency=4)
    kills = 0
    for n in range(TURNS):
        keys = [f"temporary-{n}-a", f"temporary-{n}-b"]
        agent_script = scenarios.script(scenarios.REPLY, [scenarios.effect(k) for k in keys])
        agent = scenarios.make_agent(user, f"Sketcher{n}", agent_script)
        chat = chat_services.create_chat(owner=user, title=f"Scratch {n}", agents=[agent], temporary=True)
        prompt = f"temporary question {n}"
        with inside(chat.pk):
            trigger = chat_services.send_message(chat=chat, content=prompt)
            runs = Run.objects.filter(trigger_message=trigger).order_by("created_at")
            turn = scenarios.Turn([scenarios.Expected(agent, chat, full_reply(agent_script, prompt), keys)],
                                  target=runs.first, seconds=scenarios.streaming_seconds(agent_script, prompt))
            killed = scenarios.kill_at_a_random_moment(cluster, turn, rng)
            scenarios.wait_until_settled()
            scenarios.assert_turn_outcome(turn, user)
            scenarios.assert_no_run_left_behind()
            if killed:
                assert Run.objects.filter(status=Run.Status.RECOVERED).exists()
        assert not Message.objects.filter(content__contains=prompt).exists()
        kills += killed
        if kills:
            break
    assert not Run.objects.exists(), "a temporary chat's runs stay in its image"
    chaos_counts.update({"kills": kills, "kills_temporary": kills, "turns": n + 1})
    assert kills == 1, f"every one of {TURNS} turns ended before its kill moment"
