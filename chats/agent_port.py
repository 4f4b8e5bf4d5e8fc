"""What chats asks of agents_app, without importing it.

agents_app imports chats, never the reverse (`make lint` holds it). chats stores memberships,
messages and the ids of the runs that wrote them; the few questions only agents_app can answer —
which agents a user may use, the runs behind a page of messages, a regenerated reply, a remote
attached to a thread, the stuck-stream repair — go through the AgentPort that agents_app provides
at start-up (AgentsAppConfig.ready hands over agents_app.for_chats). A new message reaches the
agents the same way, through chats.delivery.
"""

from typing import Protocol


class AgentPort(Protocol):
    def agents_usable_by(self, *, user):
        """The agents the user may add to a chat (a queryset, ordered by name)."""

    def agent_for_user(self, *, user, agent_id):
        """An agent the user may use; NotFound otherwise."""

    def agent_named_in_field(self, *, user, agent_id, field: str):
        """agent_for_user for an id a request gave in field: an unknown one is InvalidInput."""

    def source_agent(self, *, user, name: str, model: str, description: str):
        """The user's agent that imported replies of another product are from (e.g. "ChatGPT"):
        their own agent of that name, made (with that model and description) if they have none."""

    def runs_in_chat(self, *, chat, run_ids=()) -> list:
        """The chat's runs with these ids, and every run still queued or running."""

    def regenerate(self, *, message):
        """Queue a new answer to the question this reply answered; returns the queued run."""

    def remote_for_user(self, *, user, remote_id):
        """One of the user's remotes; NotFound otherwise."""

    def attach_remote(self, *, chat, remote, thread=None, new_thread_title: str | None = None):
        """Declare the remote in a thread (or a new one); returns the resource message."""

    def rows_for_temporary_chat(self, *, owner_id: int) -> list[tuple[type, list]]:
        """agents_app's rows a temporary chat's image copies, as (model, instances), no secrets."""

    def stuck_streams(self):
        """The messages still streaming with no live run behind them (a queryset)."""

    def settle_stuck_message(self, *, message) -> str:
        """Settle one stuck stream as interrupted; returns what was done."""


_port: AgentPort | None = None


def provide(port: AgentPort) -> None:
    """agents_app hands over its side at start-up (AgentsAppConfig.ready)."""
    global _port
    _port = port


def agents() -> AgentPort:
    """The port agents_app provided: always there once Django has started."""
    if _port is None:
        raise RuntimeError("agents_app has not provided chats.agent_port (AgentsAppConfig.ready does)")
    return _port
