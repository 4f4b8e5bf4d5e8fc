"""What a turn costs the database: the same few statements however long its thread, so a burst of
new turns starts and ends as fast as the database answers."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents_app.models import Run
from agents_app.turns.execution import execute_run
from chats import services

pytestmark = pytest.mark.django_db(transaction=True)

# Its start: the claim, the run with what it names, then in one transaction the chat moved up
# (which takes its row lock), the reply and the run pointing at it; the thread's messages and the
# memory blocks. Its end, in one transaction: the run, the reply (locked, then written), the
# chat's preview, the chat's member agents (an agent alone in its chat has no one to tell). Each
# transaction's BEGIN and COMMIT count too.
TURN_STATEMENTS = 16


def statements_of_a_turn(agent) -> int:
    trigger = services.send_message(chat=agent.main_chat, content="Once more")
    run = Run.objects.get(trigger_message=trigger)
    with CaptureQueriesContext(connection) as statements:
        assert execute_run(run.pk) == "succeeded"
    return len(statements)


@pytest.mark.needs_postgres
def test_a_turn_costs_the_same_few_statements_however_long_its_thread(scripted_agent, run_now):
    agent = scripted_agent(reply="Done.")
    assert statements_of_a_turn(agent) == TURN_STATEMENTS
    for index in range(10):
        services.send_message(chat=agent.main_chat, content=f"Message {index}")
        run_now()
    assert statements_of_a_turn(agent) == TURN_STATEMENTS
