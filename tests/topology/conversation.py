"""The conversation the topology test streams: made in the hosts' database through the real
services (by `manage.py shell`, since this pytest process is not connected to that database),
and read back with psycopg."""

import json
from dataclasses import dataclass

import psycopg

USERNAME = "traveller"
PASSWORD = "a-password-for-three-hosts-1"
PROMPT = "cross the hosts"
# About 100 characters a second for about 10 seconds: web 1 dies and then host C, about three
# seconds in on a quiet machine, while the reply is still on its way, with room to spare. Plain
# sentences, so the page shows exactly these characters (no markdown to render).
SCRIPT = {
    "reply": "Relayed: {prompt}. " + "Each word leaves a worker, crosses the bridge, and reaches the tab once. " * 13,
    "chunk": 4,
    "delay": 0.04,
}


def make() -> None:
    """Run by `manage.py shell` on the hosts' database: a user, a scripted agent, a chat with it;
    prints their ids as JSON."""
    from django.contrib.auth import get_user_model

    from agents_app import services as agent_services
    from chats import services as chat_services

    user = get_user_model().objects.create_user(USERNAME, password=PASSWORD)
    agent = agent_services.create_agent(owner=user, name="Relay", model="test:scripted", settings={"script": SCRIPT})
    chat = chat_services.create_chat(owner=user, title="Across three hosts", agents=[agent])
    print(json.dumps({"agent": agent.pk, "chat": str(chat.pk)}))


def expected_reply() -> str:
    from agents_app.scripted import full_reply

    return full_reply(SCRIPT, PROMPT)


@dataclass
class RunRow:
    id: str
    kind: str
    status: str
    lease_owner: str
    reply_message_id: int | None

    @property
    def owner_pid(self) -> int | None:
        """The pid in the lease owner ("host:pid:thread"): the process running the turn."""
        parts = self.lease_owner.split(":")
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


class Records:
    """The hosts' database, read from this process: a fresh connection per read."""

    def __init__(self, url: str, ids: dict):
        self.url = url
        self.agent_id, self.chat_id = ids["agent"], ids["chat"]

    def _rows(self, query: str, args=()) -> list[tuple]:
        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return conn.execute(query, args).fetchall()

    def runs(self) -> list[RunRow]:
        rows = self._rows("SELECT id::text, kind, status, lease_owner, reply_message_id FROM agents_app_run "
                          "WHERE agent_id = %s ORDER BY created_at", [self.agent_id])
        return [RunRow(*row) for row in rows]

    def replies(self) -> list[tuple[int, str, str]]:
        """(id, status, content) of every agent message of the chat."""
        return self._rows("SELECT id, status, content FROM chats_message WHERE chat_id = %s AND kind = 'message' "
                          "AND sender_agent_id IS NOT NULL ORDER BY id", [self.chat_id])

    def streaming_run(self) -> RunRow | None:
        """The run once a worker holds it and its reply exists."""
        return next((run for run in self.runs() if run.status == "running" and run.reply_message_id), None)

    def unfinished_runs(self) -> int:
        return self._rows("SELECT count(*) FROM agents_app_run WHERE status IN ('queued', 'running')")[0][0]
