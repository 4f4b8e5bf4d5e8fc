"""Copies of chats: fork at a message, export (JSON with everything, or Markdown), import.

An export holds the chat, its members, threads and messages with their times, and the files sent
with its messages (their bytes in base64); importing it gives an equal chat (new ids, same
content, structure, times and files). Runs are not exported: they are the history of how replies
were made, not part of the conversation. Files not yet sent are drafts and stay behind.
"""

import base64
import binascii

from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from chats import agent_port, events
from chats.attachments.files import file_payload
from chats.models import Attachment, Chat, Membership, Message, Thread
from chats.services.attachments import upload_file
from chats.services.chats import _clean_title
from chats.services.messages import _check_choice
from chats.temporary.scope import current
from hub.errors import Conflict, InvalidInput

EXPORT_FORMAT = "hub.chat"
EXPORT_VERSION = 2
# Version 1 is version 2 without files.
IMPORTABLE_VERSIONS = (1, 2)
MAX_IMPORT_MESSAGES = 100_000


def _copy_messages(*, source: Chat, target: Chat, messages, thread_map: dict) -> dict:
    """Copy messages in id order, mapping threads and the replies logs belong to. Returns the
    copies' ids by the originals'."""
    id_map = {}
    for message in messages:
        copy = Message.objects.create(
            chat=target, thread=thread_map.get(message.thread_id), sender_user=message.sender_user,
            sender_agent=message.sender_agent, kind=message.kind, subkind=message.subkind, format=message.format,
            content=message.content, data=message.data,
            status=Message.Status.INTERRUPTED if message.status == Message.Status.STREAMING else message.status,
            reply_to_id=id_map.get(message.reply_to_id), created_at=message.created_at, edited_at=message.edited_at,
        )
        id_map[message.pk] = copy.pk
    return id_map


@transaction.atomic
def fork_chat(*, chat: Chat, at_message: Message, title: str = "") -> Chat:
    """A new chat with the messages up to and including at_message, threads kept, same members.

    The fork's messages carry copies of their files (a file then stays with each chat however the
    other goes). Sends directory.updated (created). Raises InvalidInput for a message of another
    chat, TooLarge when the copies do not fit the user's room, and Conflict for a temporary chat
    (save it first: a fork is a stored chat).
    """
    if current() is not None:
        raise Conflict("A temporary chat cannot be forked: save it first.")
    if at_message.chat_id != chat.pk:
        raise InvalidInput.for_field("message", "is not in this chat")
    fork = Chat.objects.create(
        owner=chat.owner, title=_clean_title(title) or f"{chat.title} (fork)", description=chat.description,
        picture=chat.picture, forked_from=chat, last_message_preview=chat.last_message_preview,
    )
    Membership.objects.bulk_create([Membership(chat=fork, agent_id=m.agent_id) for m in chat.memberships.all()])
    messages = list(chat.messages.filter(pk__lte=at_message.pk).order_by("id"))
    used_threads = {m.thread_id for m in messages if m.thread_id}
    thread_map = {
        t.pk: Thread.objects.create(chat=fork, title=t.title, created_at=t.created_at,
                                    last_activity_at=t.last_activity_at)
        for t in chat.threads.filter(pk__in=used_threads).order_by("id")
    }
    id_map = _copy_messages(source=chat, target=fork, messages=messages, thread_map=thread_map)
    originals = Attachment.objects.filter(message_id__in=list(id_map)).order_by("created_at", "id")
    _store_files(fork, (_file_entry(a, a.message_id) for a in originals), id_map)  # one file in memory at a time
    last = next((m for m in reversed(messages) if m.kind == Message.Kind.MESSAGE), None)
    fork.last_message_preview = " ".join(last.content.split())[:200] if last else ""
    fork.save(update_fields=["last_message_preview"])
    events.broadcast_on_commit(events.user_group(fork.owner_id), events.directory_updated(fork, change="created"))
    return fork


def export_chat(chat: Chat) -> dict:
    """Everything in a chat as JSON-safe data (the import format)."""
    messages = chat.messages.select_related("sender_agent").order_by("id")
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "chat": {"title": chat.title, "description": chat.description, "picture": chat.picture,
                 "created_at": events.iso(chat.created_at), "updated_at": events.iso(chat.updated_at),
                 "last_message_preview": chat.last_message_preview},
        "members": [{"agent_id": m.agent_id, "name": m.agent.name}
                    for m in chat.memberships.select_related("agent").order_by("added_at", "id")],
        "threads": [{"id": t.pk, "title": t.title, "created_at": events.iso(t.created_at),
                     "last_activity_at": events.iso(t.last_activity_at)} for t in chat.threads.order_by("id")],
        "messages": [
            {"id": m.pk, "thread": m.thread_id, "reply_to": m.reply_to_id,
             "sender": {"type": "agent", "agent_id": m.sender_agent_id, "name": m.sender_agent.name}
             if m.sender_agent_id else {"type": "user"},
             "kind": m.kind, "subkind": m.subkind, "format": m.format, "content": m.content, "data": m.data,
             "status": Message.Status.INTERRUPTED if m.status == Message.Status.STREAMING else m.status,
             "created_at": events.iso(m.created_at), "edited_at": events.iso(m.edited_at)}
            for m in messages
        ],
        "files": [_exported_file(a) for a in chat.files.filter(message__isnull=False).order_by("created_at", "id")],
    }


def _exported_file(attachment: Attachment) -> dict:
    with attachment.file.open("rb") as stored:
        data = base64.b64encode(stored.read()).decode("ascii")
    return {"id": str(attachment.pk), "message": attachment.message_id, "name": attachment.name,
            "content_type": attachment.content_type, "size": attachment.size,
            "created_at": events.iso(attachment.created_at), "data": data}


def export_markdown(chat: Chat) -> str:
    """The conversation as readable Markdown: threads as sections, notes as quotes, logs left out."""
    lines = [f"# {chat.title}", ""]
    if chat.description:
        lines += [chat.description, ""]
    sections = [(None, "Main thread")] + [(t.pk, t.title) for t in chat.threads.order_by("id")]
    messages = list(chat.messages.select_related("sender_agent").exclude(kind=Message.Kind.LOG).order_by("id"))
    for thread_id, title in sections:
        in_thread = [m for m in messages if m.thread_id == thread_id]
        if not in_thread:
            continue
        lines += [f"## {title}", ""]
        for m in in_thread:
            who = m.sender_agent.name if m.sender_agent_id else "You"
            stamp = m.created_at.strftime("%Y-%m-%d %H:%M")
            if m.kind == Message.Kind.NOTE:
                lines += [f"> **Note** ({stamp}): {m.content}", ""]
            elif m.kind == Message.Kind.RESOURCE:
                lines += [f"*Resource ({m.subkind or 'remote'}): {m.content}*", ""]
            else:
                lines += [f"**{who}** · {stamp}", "", m.content, ""]
    return "\n".join(lines).rstrip() + "\n"


def _field(data: dict, name: str, kind, where: str):
    value = data.get(name)
    if not isinstance(value, kind):
        raise InvalidInput.for_field(f"{where}.{name}" if where else name, f"must be {kind.__name__}")
    return value


def _export_id(value, field: str):
    """An id the export refers to (a thread, a message): a number or a text, or none."""
    if isinstance(value, (dict, list)):
        raise InvalidInput.for_field(field, "must be a number or a text")
    return value


def _time(value, field: str):
    if value is None:
        return None
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None:
        raise InvalidInput.for_field(field, "is not an ISO 8601 time")
    return moment


@transaction.atomic
def import_chat(*, owner, data) -> Chat:
    """Create a chat from an export. Agents are matched by id, then name, among those the owner may
    use; a message from an agent that is not there keeps its name in data["imported_sender"].

    Raises InvalidInput naming the first wrong field; nothing is written then.
    """
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise InvalidInput.for_field("format", f"must be {EXPORT_FORMAT!r}")
    if data.get("version") not in IMPORTABLE_VERSIONS:
        raise InvalidInput.for_field("version", f"must be {' or '.join(map(str, IMPORTABLE_VERSIONS))}")
    meta = _field(data, "chat", dict, "")
    members = _field(data, "members", list, "")
    threads = _field(data, "threads", list, "")
    messages = _field(data, "messages", list, "")
    if len(messages) > MAX_IMPORT_MESSAGES:
        raise InvalidInput.for_field("messages", f"at most {MAX_IMPORT_MESSAGES}")
    exported_files = _decoded_files(data.get("files", []))

    usable = list(agent_port.agents().agents_usable_by(user=owner))  # looked up, never changed
    by_id = {a.pk: a for a in usable}
    by_name = {a.name.lower(): a for a in usable}

    def find_agent(ref: dict):
        agent_id = ref.get("agent_id")
        by_number = by_id.get(agent_id) if not isinstance(agent_id, (dict, list)) else None
        return by_number or by_name.get(str(ref.get("name", "")).lower())

    chat = Chat.objects.create(
        owner=owner, title=_clean_title(str(meta.get("title", ""))) or "Imported chat",
        description=str(meta.get("description", "")), picture=str(meta.get("picture", ""))[:500],
        created_at=_time(meta.get("created_at"), "chat.created_at") or timezone.now(),
        updated_at=_time(meta.get("updated_at"), "chat.updated_at") or timezone.now(),
        last_message_preview=str(meta.get("last_message_preview", ""))[:200],
    )
    agents = {a.pk: a for a in (find_agent(m) for m in members if isinstance(m, dict)) if a is not None}
    Membership.objects.bulk_create([Membership(chat=chat, agent=a) for a in agents.values()])
    thread_map = {}
    for i, t in enumerate(threads):
        if not isinstance(t, dict):
            raise InvalidInput.for_field(f"threads[{i}]", "must be an object")
        thread_map[_export_id(t.get("id"), f"threads[{i}].id")] = Thread.objects.create(
            chat=chat, title=_clean_title(str(t.get("title", "")), field=f"threads[{i}].title") or "Thread",
            created_at=_time(t.get("created_at"), f"threads[{i}].created_at") or timezone.now(),
            last_activity_at=_time(t.get("last_activity_at"), f"threads[{i}].last_activity_at") or timezone.now(),
        )
    id_map = {}
    for i, m in enumerate(messages):
        message_id = _export_id(m.get("id"), f"messages[{i}].id") if isinstance(m, dict) else None
        id_map[message_id] = _import_message(
            chat, m, i, thread_map=thread_map, id_map=id_map, find_agent=find_agent
        ).pk
    _store_files(chat, exported_files, id_map)
    events.broadcast_on_commit(events.user_group(owner.pk), events.directory_updated(chat, change="created"))
    return chat


def _import_message(chat, m, i, *, thread_map, id_map, find_agent) -> Message:
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise InvalidInput.for_field(where, "must be an object")
    sender = m.get("sender") if isinstance(m.get("sender"), dict) else {"type": "user"}
    agent = find_agent(sender) if sender.get("type") == "agent" else None
    data = m.get("data") if isinstance(m.get("data"), dict) else {}
    if sender.get("type") == "agent" and agent is None:
        data = {**data, "imported_sender": str(sender.get("name", "agent"))}
    thread = _export_id(m.get("thread"), f"{where}.thread")
    if thread is not None and thread not in thread_map:
        raise InvalidInput.for_field(f"{where}.thread", "names no thread of this export")
    content = m.get("content")
    if not isinstance(content, str):
        raise InvalidInput.for_field(f"{where}.content", "must be text")
    return Message.objects.create(
        chat=chat, thread=thread_map.get(thread), sender_agent=agent,
        sender_user=None if sender.get("type") == "agent" else chat.owner,
        kind=_check_choice(m.get("kind", "message"), Message.Kind, f"{where}.kind"),
        subkind=str(m.get("subkind", ""))[:32],
        format=_check_choice(m.get("format", "markdown"), Message.Format, f"{where}.format"),
        content=content, data=data,
        status=_check_choice(m.get("status", "final"), Message.Status, f"{where}.status"),
        reply_to_id=id_map.get(_export_id(m.get("reply_to"), f"{where}.reply_to")),
        created_at=_time(m.get("created_at"), f"{where}.created_at") or chat.created_at,
        edited_at=_time(m.get("edited_at"), f"{where}.edited_at"),
    )


def _decoded_files(entries) -> list[dict]:
    """An export's files, each with its bytes decoded, all checked before any is stored."""
    if not isinstance(entries, list):
        raise InvalidInput.for_field("files", "must be a list")
    decoded = []
    for i, entry in enumerate(entries):
        where = f"files[{i}]"
        if not isinstance(entry, dict):
            raise InvalidInput.for_field(where, "must be an object")
        name, data = entry.get("name"), entry.get("data")
        if not isinstance(name, str) or not isinstance(data, str):
            raise InvalidInput.for_field(f"{where}.name" if not isinstance(name, str) else f"{where}.data",
                                         "must be text")
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput.for_field(f"{where}.data", "is not base64") from None
        decoded.append({"message": _export_id(entry.get("message"), f"{where}.message"), "name": name,
                        "content": content, "created_at": _time(entry.get("created_at"), f"{where}.created_at")})
    return decoded


def _file_entry(attachment: Attachment, message) -> dict:
    with attachment.file.open("rb") as stored:
        content = stored.read()
    return {"message": message, "name": attachment.name, "content": content, "created_at": attachment.created_at}


def _store_files(chat: Chat, entries, id_map: dict) -> None:
    """Store copies of files in a new chat (a fork, an import), each with the copy of its message,
    and list them in the messages' data in place of the originals. A file over a limit refuses
    the copy (TooLarge); the files stored before it are removed again."""
    stored = []
    try:
        for entry in entries:
            message_pk = id_map.get(entry["message"])
            if message_pk is None:
                continue  # its message is not copied
            attachment = upload_file(chat=chat, upload=ContentFile(entry["content"], name=entry["name"]))
            stored.append(attachment)
            Attachment.objects.filter(pk=attachment.pk).update(
                message_id=message_pk, created_at=entry["created_at"] or attachment.created_at)
            attachment.message_id = message_pk
    except BaseException:
        for attachment in stored:
            attachment.file.storage.delete(attachment.file.name)
        raise
    by_message = {}
    for attachment in stored:
        by_message.setdefault(attachment.message_id, []).append(file_payload(attachment))
    # The copied data lists the original chat's files: each message lists its own instead.
    for message in Message.objects.filter(Q(data__has_key="files") | Q(pk__in=list(by_message)), chat=chat):
        message.data = {**message.data, "files": by_message.get(message.pk, [])}
        message.save(update_fields=["data"])
