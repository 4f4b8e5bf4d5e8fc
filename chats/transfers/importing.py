"""Importing an uploaded export: every conversation in its own transaction, so a bad entry skips
that chat (with its reason in the report) and the rest import; a file that is not an export, or
not valid JSON anywhere, fails before anything is stored (the whole file is read once to count
and check it, then again to import).

Who sent an imported reply: one agent per source, owned by the user ("ChatGPT", "Claude"), made
on the first import from that source (agent_port.source_agent) and member of no imported chat,
so it never answers there unless the user adds it; the model that wrote each reply is kept in
the message's data["model"] where the export says it. Original times are kept. Messages are
indexed for search as they are inserted (the search triggers), so imported chats are found at once.
"""

import time

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from chats import agent_port, events
from chats.models import Chat, Message, Transfer
from chats.services.copies import import_chat
from chats.transfers import chatgpt, claude, sources
from chats.transfers.conversations import ImportedConversation, SkipEntry, title_of
from hub.errors import HubError, InvalidInput

READERS = {"chatgpt": chatgpt.read_conversation, "claude": claude.read_conversation}
TITLE_KEYS = {"chatgpt": "title", "claude": "name", "hub": "title"}
SOURCE_AGENTS = {
    "chatgpt": {"name": "ChatGPT", "model": "openai:gpt-4o", "description": "Replies imported from ChatGPT."},
    "claude": {"name": "Claude", "model": "anthropic:claude-sonnet-4-5",
               "description": "Replies imported from Claude."},
}
MAX_REPORTED = 100  # skipped entries and imported chats listed in the report; the counts are complete
PROGRESS_SECONDS = 0.25


class ImportFailed(HubError):
    """The file as a whole is not an import of the chosen format: nothing is stored."""


class Overtaken(Exception):
    """Another delivery of the same task got further with this job: this one stops, leaving it be."""


def run_import(transfer: Transfer) -> None:
    """Import every conversation of the transfer's file that is not yet imported (transfer.done
    counts them, so a redelivered task goes on where a dead worker stopped)."""
    with transfer.file.open("rb") as stored, sources.json_streams(stored) as documents:
        fmt = _checked_format(transfer, documents)
        if fmt == "hub":
            _import_hub_documents(transfer, documents)
        else:
            _import_list(transfer, documents[0], fmt)


def _checked_format(transfer: Transfer, documents) -> str:
    found = sources.sniff_format(documents[0])
    if found == "empty":
        raise ImportFailed("The file holds no conversations.", fields={"file": ["holds no conversations"]})
    if found is None:
        raise ImportFailed("The file is not a Hub, ChatGPT or Claude export.",
                           fields={"file": ["is not a Hub, ChatGPT or Claude export"]})
    if transfer.format not in ("", "auto") and transfer.format != found:
        chosen = sources.FORMAT_NAMES[transfer.format]
        raise ImportFailed(f"This file is {sources.FORMAT_NAMES[found]}, not {chosen}.",
                           fields={"format": [f"the file is {sources.FORMAT_NAMES[found]}"]})
    if transfer.format != found:
        transfer.format = found
        Transfer.objects.filter(pk=transfer.pk).update(format=found)
    return found


def _import_list(transfer: Transfer, document, fmt: str) -> None:
    total = sources.count_conversations(document)  # raises on malformed JSON: nothing stored yet
    _set_total(transfer, total)
    agent = agent_port.agents().source_agent(user=transfer.owner, **SOURCE_AGENTS[fmt])
    progress = Progress(transfer)
    for number, entry in enumerate(sources.conversations(document), start=1):
        if number <= transfer.done:
            continue  # imported before a worker stopped
        title = title_of(entry, TITLE_KEYS[fmt])
        try:
            conversation = READERS[fmt](entry)
        except SkipEntry as skip:
            progress.step(number, skipped=_skip(number, title, str(skip)))
            continue
        if not conversation.messages:
            progress.step(number, skipped=_skip(number, title or conversation.title, "holds no messages"))
            continue
        progress.step(number, store=lambda c=conversation: _store_conversation(transfer.owner, c, agent),
                      on_error=lambda exc, n=number, t=title: _skip(n, t, _reason(exc)))


def _import_hub_documents(transfer: Transfer, documents) -> None:
    _set_total(transfer, len(documents))
    progress = Progress(transfer)
    for number, document in enumerate(documents, start=1):
        if number <= transfer.done:
            continue
        try:
            data = sources.whole_document(document)
        except InvalidInput as exc:
            if len(documents) == 1:
                raise
            progress.step(number, skipped=_skip(number, document.label, str(exc)))
            continue
        title = title_of(data.get("chat") if isinstance(data, dict) else None, "title")
        # One chat's file that cannot be imported fails the job; in a zip of many, it is skipped.
        on_error = None if len(documents) == 1 else (lambda exc, n=number, t=title: _skip(n, t, _reason(exc)))
        progress.step(number, store=lambda d=data: import_chat(owner=transfer.owner, data=d), on_error=on_error)


def _reason(exc: Exception) -> str:
    if not isinstance(exc, HubError):
        return "the database refused it"
    fields = getattr(exc, "fields", None) or {}
    if fields:
        name, problems = next(iter(fields.items()))
        return f"{name} {problems[0]}" if problems else name
    return str(exc)


def _skip(number: int, title: str, reason: str) -> dict:
    return {"entry": number, "title": title, "reason": reason}


def skip_text(skip: dict) -> str:
    """conversation 17 ("Trip plan"): mapping is not an object"""
    title = f' ("{skip["title"]}")' if skip.get("title") else ""
    return f"conversation {skip['entry']}{title}: {skip['reason']}"


def _set_total(transfer: Transfer, total: int) -> None:
    transfer.total = total
    Transfer.objects.filter(pk=transfer.pk).update(total=total)
    events.broadcast_now(events.user_group(transfer.owner_id), events.transfer_updated(transfer))


class Progress:
    """Counts each entry in the transaction that imports it (so a chat is imported exactly once,
    even by a redelivered task) and tells the user's tabs at most every PROGRESS_SECONDS."""

    def __init__(self, transfer: Transfer):
        self.transfer = transfer
        self.sent_at = 0.0
        report = transfer.report or {}
        self.report = {"imported": report.get("imported", 0), "skipped": report.get("skipped", 0),
                       "skips": report.get("skips", []), "chats": report.get("chats", [])}

    def step(self, number: int, *, store=None, skipped: dict | None = None, on_error=None) -> None:
        try:
            with transaction.atomic():
                if not self._still_mine(number):
                    raise Overtaken()
                if store is not None:
                    chat = store()
                    self.report["imported"] += 1
                    if len(self.report["chats"]) < MAX_REPORTED:
                        self.report["chats"].append({"id": str(chat.pk), "title": chat.title})
                self._record(number, skipped)
        except (HubError, DataError, IntegrityError) as exc:
            if on_error is None or isinstance(exc, ImportFailed):
                raise
            with transaction.atomic():
                self._record(number, on_error(exc))
        self._tell()

    def _still_mine(self, number: int) -> bool:
        row = Transfer.objects.select_for_update().filter(pk=self.transfer.pk).values("done").first()
        return row is not None and row["done"] == number - 1

    def _record(self, number: int, skipped: dict | None) -> None:
        if skipped is not None:
            self.report["skipped"] += 1
            if len(self.report["skips"]) < MAX_REPORTED:
                self.report["skips"].append(skipped)
        self.transfer.done, self.transfer.report = number, self.report
        Transfer.objects.filter(pk=self.transfer.pk).update(done=number, report=self.report)

    def _tell(self) -> None:
        now = time.monotonic()
        if now - self.sent_at >= PROGRESS_SECONDS or self.transfer.done == self.transfer.total:
            self.sent_at = now
            events.broadcast_now(events.user_group(self.transfer.owner_id), events.transfer_updated(self.transfer))


def _store_conversation(owner, conversation: ImportedConversation, agent) -> Chat:
    """One imported conversation as a chat with its messages (times kept), and the directory told."""
    now = timezone.now()
    created = conversation.created_at or now
    last = next((m for m in reversed(conversation.messages)), None)
    chat = Chat.objects.create(
        owner=owner, title=_title(conversation), created_at=created,
        updated_at=conversation.updated_at or (last.created_at if last and last.created_at else created),
        last_message_preview=" ".join(last.content.split())[:200] if last else "",
    )
    Message.objects.bulk_create([
        Message(chat=chat, sender_user=owner if m.role == "user" else None,
                sender_agent=agent if m.role == "assistant" else None, kind=Message.Kind.MESSAGE,
                format=Message.Format.MARKDOWN, content=m.content, data=m.data, status=Message.Status.FINAL,
                created_at=m.created_at or created)
        for m in conversation.messages
    ], batch_size=500)
    events.broadcast_on_commit(events.user_group(owner.pk), events.directory_updated(chat, change="created"))
    return chat


def _title(conversation: ImportedConversation) -> str:
    title = " ".join(conversation.title.split())[:200]
    if title:
        return title
    first = next((m.content for m in conversation.messages if m.role == "user"), "")
    return " ".join(first.split())[:60] or "Imported chat"
