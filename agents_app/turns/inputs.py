"""The model's input for a turn: the thread's conversation with its files, the instructions (the
agent's system prompt, the instructions of the chat's folder, the frozen shared memory, the
thread's notes) and the prompt that triggered it."""

import logging

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from agents_app.models import Agent, Run
from agents_app.turns.files import ThreadFiles
from chats import memory, selectors
from chats.models import Message

log = logging.getLogger(__name__)


def thread_messages_of(run: Run) -> list[Message]:
    """Every message of the run's thread, each with its sending agent, and the run's question
    among them. The run's own agent is the one it has; the others (a thread where several agents
    talk) are read in one query, and most threads have none. A join for every turn's start would
    cost more to build than the rows it brings."""
    messages = selectors.thread_history(chat=run.chat, thread_id=run.thread_id)
    agents = {run.agent_id: run.agent}
    others = {m.sender_agent_id for m in messages} - agents.keys() - {None}
    if others:
        agents |= Agent.objects.in_bulk(others)
    for message in messages:
        if message.sender_agent_id is not None:
            message.sender_agent = agents[message.sender_agent_id]
        if message.pk == run.trigger_message_id:
            run.trigger_message = message  # load_run leaves it to this read
    return messages


def conversation_messages(run: Run, thread_messages: list[Message], files: ThreadFiles | None = None):
    """The thread's conversation before the run's trigger as model messages, each with its files
    (agents_app.turns.files): logs, notes and resources are left out."""
    history = []
    for row in thread_messages:
        if run.trigger_message_id is not None and row.pk >= run.trigger_message_id:
            break  # in id order: the rest came with or after the trigger
        if row.kind != Message.Kind.MESSAGE or not row.content:
            continue
        if row.sender_agent_id == run.agent_id:
            history.append(ModelResponse(parts=[TextPart(content=row.content)]))
        elif row.sender_agent_id is not None:
            history.append(ModelRequest(parts=[UserPromptPart(content=f"{row.sender_agent.name}: {row.content}")]))
        else:
            history.append(ModelRequest(parts=[UserPromptPart(content=with_files(row.content, row, files))]))
    return history


def with_files(text: str, message: Message | None, files: ThreadFiles | None):
    """A user prompt's content: its text, followed by its message's files when it has any."""
    parts = files.parts_for(message) if files is not None and message is not None else []
    return [text, *parts] if parts else text


def memory_section(run: Run) -> str:
    """The user's shared memory, read once and frozen for the turn; a failed read is logged."""
    try:
        blocks = memory.snapshot(owner=run.chat.owner_id)  # the id will do: no read of the user
    except Exception:
        log.warning("run %s: shared memory could not be read; the turn goes on without it", run.pk, exc_info=True)
        return ""
    if not blocks:
        return ""
    body = "\n".join(f"<{b['label']}>\n{b['content']}\n</{b['label']}>" for b in blocks)
    return "Shared memory (what the user asked agents to keep across chats):\n" + body


def notes_section(thread_messages: list[Message]) -> str:
    """The thread's notes (the first 50), as annotations beside the conversation, not part of it."""
    notes = [row for row in thread_messages if row.kind == Message.Kind.NOTE][:50]
    if not notes:
        return ""
    lines = [f"- {note.content}" for note in notes]
    return "Notes the user attached to this thread (annotations, not messages to answer):\n" + "\n".join(lines)


def folder_section(run: Run) -> str:
    """The instructions of the folder the chat is in: every agent in the folder's chats reads
    them, as a project's."""
    instructions = selectors.folder_instructions(chat=run.chat).strip()
    if not instructions:
        return ""
    return "Instructions for every chat in this folder (from the user):\n" + instructions


def turn_instructions(run: Run, thread_messages: list[Message]) -> str:
    parts = [run.agent.system_prompt.strip(), folder_section(run), memory_section(run),
             notes_section(thread_messages)]
    return "\n\n".join(p for p in parts if p)


def trigger_prompt(run: Run, files: ThreadFiles | None = None):
    trigger = run.trigger_message
    if trigger is None:
        return ""
    if trigger.sender_agent_id is not None and trigger.sender_agent_id != run.agent_id:
        return f"{trigger.sender_agent.name}: {trigger.content}"
    return with_files(trigger.content, trigger, files)
