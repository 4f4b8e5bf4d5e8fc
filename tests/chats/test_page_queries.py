"""Opening a chat costs the same few queries however long the chat and however many chats the user
has: nothing on the page is read once per message, thread, member, run or chat."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chats import services

pytestmark = pytest.mark.django_db

# The session, the user, the chat, the user's agents, the directory page (its pinned chats, the
# rest, their tags), the user's folders, the chat's threads (counts, last messages, rows), its
# newest page of messages, their runs, its members.
OPEN_CHAT_QUERIES = 14


def queries_to_open(client, chat) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("chats:detail", args=[chat.pk]))
    assert response.status_code == 200
    return len(queries)


def shown_state(client, chat) -> dict:
    page = client.get(reverse("chats:detail", args=[chat.pk])).content.decode()
    start = page.index('<script id="hub-initial" type="application/json">') + len(
        '<script id="hub-initial" type="application/json">')
    return json.loads(page[start:page.index("</script>", start)])["open"]


def fill(chat, *, agents, threads: int, messages_per_thread: int) -> None:
    for agent in agents:
        services.add_member(chat=chat, agent=agent)
    for number in range(threads):
        first = services.send_message(chat=chat, content=f"question {number}", new_thread_title=f"Thread {number}")
        for index in range(1, messages_per_thread):
            services.send_message(chat=chat, content=f"answer {index}", thread=first.thread,
                                  sender_agent=agents[index % len(agents)])


def test_opening_a_long_chat_among_many_costs_as_many_queries_as_a_short_one(client, user, make_agent):
    short = services.create_chat(owner=user, title="Short")
    helper = make_agent(user, name="Helper")
    fill(short, agents=[helper], threads=1, messages_per_thread=2)
    client.force_login(user)
    few = queries_to_open(client, short)

    others = [make_agent(user, name=f"Agent {n}") for n in range(3)]
    for number in range(30):
        services.create_chat(owner=user, title=f"Chat {number}", agents=others[:1])
    long = services.create_chat(owner=user, title="Long")
    fill(long, agents=[helper, *others], threads=4, messages_per_thread=20)  # runs queued for the agents too

    assert queries_to_open(client, long) == few <= OPEN_CHAT_QUERIES
    opened = shown_state(client, long)
    assert len(opened["threads"]) == 4 and len(opened["members"]) == 4
    assert [m["content"] for m in opened["page"]["messages"]][-2:] == ["answer 18", "answer 19"]
    assert opened["page"]["messages"][-1]["sender"]["name"] == "Agent 2"
