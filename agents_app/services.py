"""Every write to the agent registry."""

from django.db import transaction
from django.utils import timezone

from agents_app import outbound, providers
from agents_app import tools as tools_registry
from agents_app.models import Agent, Run
from agents_app.turns import runs
from agents_app.usage import limit as usage_limit
from chats import services as chat_services
from chats.models import Message
from hub.errors import InvalidInput

EDITABLE_FIELDS = (
    "name", "avatar", "description", "model", "base_url", "system_prompt", "settings", "tools",
    "reply_policy", "recovery_policy", "allow_private_network",
)


def check_agent(agent: Agent) -> None:
    """Raise InvalidInput naming the field when an (unsaved) agent is not valid; the services call
    it before every write, forms (the admin) to show a problem before anything is written."""
    if not agent.name.strip():
        raise InvalidInput.for_field("name", "may not be empty")
    if not agent.model.strip():
        raise InvalidInput.for_field("model", "may not be empty")
    providers.validate_agent_model(agent.model, agent.base_url)
    if agent.allow_private_network and agent.owner_id is not None:
        raise InvalidInput.for_field("allow_private_network", "only a shared agent may reach private addresses")
    if agent.base_url.strip():
        outbound.check_url(agent.base_url.strip(), field="base_url", allow_private=agent.allow_private_network)
    given_tools = agent.tools if isinstance(agent.tools, list) else []
    unknown_tools = [t for t in given_tools if t not in tools_registry.REGISTRY]
    if unknown_tools:
        raise InvalidInput.for_field("tools", f"unknown tool {unknown_tools[0]!r}")
    if agent.reply_policy not in Agent.ReplyPolicy.values:
        raise InvalidInput.for_field("reply_policy", f"must be one of {', '.join(Agent.ReplyPolicy.values)}")
    if agent.recovery_policy not in Agent.RecoveryPolicy.values:
        raise InvalidInput.for_field(
            "recovery_policy", f"must be one of {', '.join(Agent.RecoveryPolicy.values)}"
        )
    if not isinstance(agent.settings, dict):
        raise InvalidInput.for_field("settings", "must be an object")
    if agent.settings.get("continuation") not in (None, *Agent.CONTINUATIONS):
        raise InvalidInput.for_field("settings.continuation", f"must be one of {', '.join(Agent.CONTINUATIONS)}")
    if agent.settings.get("vision") not in (None, True, False):
        raise InvalidInput.for_field("settings.vision", "must be true, false or left out")
    if not isinstance(agent.tools, list):
        raise InvalidInput.for_field("tools", "must be a list")


@transaction.atomic
def create_agent(*, owner, name: str, model: str, **fields) -> Agent:
    """Create an agent and, for an owned agent, its main chat with the agent as a member.

    owner None makes a shared agent (staff) that every user may add; it has no main chat.
    Raises InvalidInput for a missing name or model or an unknown policy.
    """
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput.for_field(sorted(unknown)[0], "unknown field")
    agent = Agent(owner=owner, name=(name or "").strip(), model=(model or "").strip(), **fields)
    check_agent(agent)
    agent.save()
    if owner is not None:
        chat = chat_services.create_chat(
            owner=owner, title=agent.name, description=agent.description, picture=agent.avatar, agents=[agent]
        )
        agent.main_chat = chat
        agent.save(update_fields=["main_chat"])
    return agent


@transaction.atomic
def update_agent(*, agent: Agent, **fields) -> Agent:
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput.for_field(sorted(unknown)[0], "unknown field")
    for name, value in fields.items():
        setattr(agent, name, value.strip() if isinstance(value, str) and name in ("name", "model") else value)
    check_agent(agent)
    agent.save()
    return agent


@transaction.atomic
def delete_agent(*, agent: Agent) -> Agent:
    """Soft-delete an agent: it leaves every chat; its past messages keep their sender."""
    agent.deleted_at = timezone.now()
    agent.save(update_fields=["deleted_at"])
    for membership in agent.memberships.select_related("chat"):
        chat_services.remove_member(chat=membership.chat, agent=agent)
    return agent


# --- Starting and steering turns -------------------------------------------------------------
# Every path that starts a turn queues a Run through agents_app.turns.runs, so each is durable.

def _last_reply(*, chat, thread, agent) -> Message | None:
    return (
        Message.objects.filter(chat=chat, thread=thread, sender_agent=agent, kind=Message.Kind.MESSAGE)
        .order_by("-id").first()
    )


@transaction.atomic
def continue_last_turn(*, chat, agent, thread=None) -> Run:
    """Queue a continuation of the agent's last reply in the thread, streaming on into it.

    Raises InvalidInput when the agent was deleted, there is no reply to continue or it is still streaming.
    """
    if agent.deleted_at is not None:
        raise InvalidInput.for_field("agent", f"{agent.name} was deleted")
    reply = _last_reply(chat=chat, thread=thread, agent=agent)
    if reply is None:
        raise InvalidInput.for_field("thread", f"{agent.name} has no reply to continue here")
    if reply.status == Message.Status.STREAMING:
        raise InvalidInput.for_field("thread", "that reply is still streaming")
    usage_limit.check_can_start(owner_id=chat.owner_id)
    previous = reply.run
    return runs.create_run(
        agent=agent, chat=chat, thread=thread, trigger_message=previous.trigger_message if previous else None,
        kind=Run.Kind.CONTINUE, reply_message=reply,
        checkpoint={"text": reply.content, "reasoning": (reply.data or {}).get("reasoning", "")},
    )


@transaction.atomic
def regenerate(*, message: Message) -> Run:
    """Queue a new answer to the same question, streamed into the same reply (old text kept in data).

    Raises InvalidInput for a message that is not a finished agent reply, or whose agent was deleted.
    """
    message = Message.objects.select_for_update(of=("self",)).select_related("run", "sender_agent").get(pk=message.pk)
    if message.sender_agent_id is None or message.kind != Message.Kind.MESSAGE or message.run_id is None:
        raise InvalidInput.for_field("message", "only an agent's reply can be regenerated")
    if message.sender_agent.deleted_at is not None:
        raise InvalidInput.for_field("message", f"{message.sender_agent.name} was deleted")
    if message.status == Message.Status.STREAMING:
        raise InvalidInput.for_field("message", "that reply is still streaming")
    usage_limit.check_can_start(owner_id=message.chat.owner_id)  # no query when there is no limit
    # Each version keeps its own steps (tool calls, thinking): the page shows a version's only.
    earlier = message.data.get("versions", [])
    archived = {log_id for version in earlier for log_id in version.get("log_ids", [])}
    log_ids = [pk for pk in Message.objects.filter(reply_to=message, kind=Message.Kind.LOG).order_by("id")
               .values_list("pk", flat=True) if pk not in archived]
    # The tokens an answer cost go with it: the new answer counts its own.
    kept = {key: value for key, value in message.data.items() if key != "usage"}
    version = {"content": message.content, "run_id": str(message.run_id), "log_ids": log_ids}
    if message.data.get("usage"):
        version["usage"] = message.data["usage"]
    versions = [*earlier, version]
    Message.objects.filter(pk=message.pk).update(data={**kept, "versions": versions})
    message.data = {**kept, "versions": versions}
    previous = message.run
    return runs.create_run(
        agent=message.sender_agent, chat=message.chat, thread=message.thread,
        trigger_message=previous.trigger_message, kind=Run.Kind.REGENERATE, reply_message=message,
    )


def cancel_run(*, run: Run) -> bool:
    """Ask a live run to stop (within a second); its partial reply is kept as cancelled."""
    return runs.request_cancel(run)


def chat(agent: Agent, text: str, *, thread=None, on_event=None, on_done=None, on_error=None, cancel=None,
         timeout: float = 600.0) -> Message | None:
    """Drive one turn from code: send text to the agent (in its main chat, or thread's chat) and
    follow the reply until it settles, calling on_event(event dict) for each delta.

    The turn runs in a worker like any other, so it is just as durable: if the worker dies the
    turn recovers, and this call follows it into its continuation. Each delta is text to put at
    its offset; when the agent's recovery hook dropped the partial text and the turn started
    again, the next delta has offset 0 and replaces what came before. cancel is a threading.Event;
    setting it cancels the turn. Errors go to on_error, or raise TurnFailed when none is given.
    Returns the settled reply.
    """
    import time

    from chats.streams import replay_buffer

    target_chat = thread.chat if thread is not None else agent.main_chat
    if target_chat is None:
        raise InvalidInput.for_field("agent", f"{agent.name} has no main chat; give a thread")
    trigger = chat_services.send_message(chat=target_chat, content=text, thread=thread)
    run = Run.objects.filter(trigger_message=trigger, agent=agent).first()
    if run is None:
        raise InvalidInput.for_field("agent", f"{agent.name} does not answer messages here")
    delivered = ""
    deadline = time.monotonic() + timeout
    cancelled = False
    while time.monotonic() < deadline:
        run = runs.latest_in_chain(Run.objects.get(pk=run.pk))
        if cancel is not None and cancel.is_set() and not cancelled:
            runs.request_cancel(run)
            cancelled = True
        if run.reply_message_id:
            streamed = replay_buffer().read(run.reply_message_id)["text"]
            reply = Message.objects.get(pk=run.reply_message_id)
            text_now = reply.content if reply.status != Message.Status.STREAMING else streamed
            settled = reply.status != Message.Status.STREAMING and run.is_terminal
            delta = _delta_since(delivered, text_now, settled=settled)
            if delta is not None:
                delivered = text_now
                if on_event is not None:
                    on_event({"type": "message.delta", "message_id": reply.pk, "run_id": str(run.pk),
                              "offset": delta[0], "text": delta[1], "part": "text"})
            if settled:
                if reply.status == Message.Status.ERROR or run.status == Run.Status.FAILED:
                    failure = TurnFailed(reply.data.get("error") or run.error or "the turn failed")
                    if on_error is None:
                        raise failure
                    on_error(failure)
                    return reply
                if on_done is not None:
                    on_done(reply)
                return reply
        time.sleep(0.05)
    failure = TurnFailed(f"no answer within {timeout:.0f} seconds")
    if on_error is None:
        raise failure
    on_error(failure)
    return None


def _delta_since(delivered: str, text_now: str, *, settled: bool) -> tuple[int, str] | None:
    """(offset, text) that takes a follower of the reply from delivered to text_now, or None.

    A turn started again after a recovery empties the reply and streams it anew: while the new
    text is still a start of what was delivered nothing is sent; once it differs it is sent whole
    from offset 0.
    """
    if text_now == delivered:
        return None
    if text_now.startswith(delivered):
        return len(delivered), text_now[len(delivered):]
    if delivered.startswith(text_now) and not settled:
        return None
    return 0, text_now


class TurnFailed(Exception):
    pass


LIBRARIAN = {
    "name": "Librarian",
    "avatar": "",  # its initials: an emoji is an empty box where no colour emoji font is installed
    "description": "Hub's built-in agent: finds what you said across your chats and what your files say, and "
    "keeps your shared memory. Works offline; it is not a language model.",
    "model": "builtin:librarian",
    "tools": ["search_messages", "search_files", "list_chats", "read_memory", "remember"],
}


def ensure_builtin_agents() -> list[Agent]:
    """The shared agents a fresh hub offers: the Librarian (also made by a migration), and an
    Assistant on the provider configured in the environment, if any. Safe to call at every start."""
    created = []
    if not Agent.objects.filter(owner__isnull=True, model=LIBRARIAN["model"], deleted_at__isnull=True).exists():
        created.append(create_agent(owner=None, **LIBRARIAN))
    provider_model = _environment_model()
    if not provider_model:
        return created
    from agents_app import catalog

    # The configured default may not be on the server (a local one offers its own): then the
    # first model it offers, so the Assistant answers instead of failing every turn.
    model = catalog.first_offered(provider_model)
    assistant = Agent.objects.filter(owner__isnull=True, name="Assistant", deleted_at__isnull=True).first()
    if assistant is None and not Agent.objects.filter(owner__isnull=True, name="Assistant").exists():
        created.append(create_agent(
            owner=None, name="Assistant", model=model,
            description=f"A general assistant on {model}.",
            system_prompt="You are a helpful assistant in a multi-agent chat. Be concise and clear.",
        ))
    elif assistant is not None and assistant.model == provider_model and model != provider_model:
        update_agent(agent=assistant, model=model, description=f"A general assistant on {model}.")
    return created


def _environment_model() -> str:
    import os

    if os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"):
        return f"openai:{os.environ.get('HUB_ASSISTANT_MODEL', 'gpt-4.1-mini')}"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return f"anthropic:{os.environ.get('HUB_ASSISTANT_MODEL', 'claude-sonnet-4-5')}"
    if os.environ.get("OLLAMA_BASE_URL"):
        return f"ollama:{os.environ.get('HUB_ASSISTANT_MODEL', 'llama3.2')}"
    return ""
