"""Every read of conversations that is more than a get. Each takes the user or a chat it owns."""

from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError

from chats.directory import (  # noqa: F401 (the directory's reads, asked for here like every read)
    DIRECTORY_SEARCH_MAX_CHARS,
    DirectoryPage,
    decode_cursor,
    directory_page,
    encode_cursor,
    folder_for_user,
    folder_instructions,
    folders_for_user,
    tag_for_user,
    tags_for_user,
)
from chats.models import Attachment, Chat, Membership, Message, ShareLink, Thread
from hub.errors import NotFound
from hub.prepared import PreparedRead


def chat_for_user(*, user, chat_id, lock: bool = False, include_deleted: bool = False) -> Chat:
    """The user's chat with that id; another user's, a deleted or a malformed id is NotFound."""
    if not getattr(user, "is_authenticated", False):
        raise NotFound("no such chat")
    chats = Chat.objects.filter(owner=user)
    if not include_deleted:
        chats = chats.filter(deleted_at__isnull=True)
    if lock:
        chats = chats.select_for_update()
    try:
        return chats.get(pk=chat_id)
    except (Chat.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        # A malformed UUID raises ValidationError: it is as unknown as a missing one.
        raise NotFound("no such chat") from None


def thread_for_chat(*, chat: Chat, thread_id) -> Thread:
    try:
        return chat.threads.get(pk=int(thread_id))
    except (Thread.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such thread") from None


def message_for_chat(*, chat: Chat, message_id) -> Message:
    try:
        return chat.messages.select_related("sender_agent", "sender_user", "chat").get(pk=int(message_id))
    except (Message.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such message") from None


def file_for_user(*, user, file_id) -> Attachment:
    """The user's file with that id, in a chat not deleted; another user's, or a malformed id, is
    NotFound."""
    if not getattr(user, "is_authenticated", False):
        raise NotFound("no such file")
    try:
        return Attachment.objects.select_related("chat").get(pk=file_id, owner=user, chat__deleted_at__isnull=True)
    except (Attachment.DoesNotExist, ValueError, TypeError, DjangoValidationError):
        raise NotFound("no such file") from None


def chat_files(*, chat: Chat):
    """The chat's files, oldest first (sent and not yet sent)."""
    return chat.files.all()


def chats_for_user(*, user):
    """The user's live chats, most recently updated first."""
    return Chat.objects.filter(owner=user, deleted_at__isnull=True).order_by("-updated_at", "-id")


def members_of(*, chat: Chat) -> list:
    return [m.agent for m in Membership.objects.filter(chat=chat).select_related("agent").order_by("added_at", "id")]


@dataclass
class ThreadView:
    """One thread of a ChatView: its conversation, and its notes and resources kept apart."""

    thread: Thread | None  # None is the chat's default thread
    messages: list[Message] = field(default_factory=list)
    notes: list[Message] = field(default_factory=list)
    resources: list[Message] = field(default_factory=list)

    @property
    def id(self):
        return self.thread.pk if self.thread else None

    @property
    def title(self) -> str:
        return self.thread.title if self.thread else "Main thread"

    @property
    def last_message(self) -> Message | None:
        candidates = [m for m in (self.messages + self.notes + self.resources)]
        return max(candidates, key=lambda m: m.pk) if candidates else None

    @property
    def last_activity(self):
        last = self.last_message
        if self.thread is not None:
            if last is None or self.thread.last_activity_at > last.created_at:
                return self.thread.last_activity_at
        return last.created_at if last else None

    def add(self, message: Message) -> None:
        if message.kind == Message.Kind.NOTE:
            self.notes.append(message)
        elif message.kind == Message.Kind.RESOURCE:
            self.resources.append(message)
        else:
            self.messages.append(message)


@dataclass
class ChatView:
    """The read side of a chat: the chat, its latest page of messages, grouped into threads."""

    chat: Chat
    messages: list[Message]
    threads: list[ThreadView]
    has_more: bool
    members: list

    @property
    def oldest_id(self) -> int | None:
        return self.messages[0].pk if self.messages else None

    @property
    def current_thread(self) -> ThreadView | None:
        """The most recently active thread, or None for a chat with no messages and no threads."""
        active = [t for t in self.threads if t.last_activity is not None]
        if not active:
            return None
        return max(active, key=lambda t: (t.last_activity, t.last_message.pk if t.last_message else 0))

    def thread(self, thread_id) -> ThreadView | None:
        return next((t for t in self.threads if t.id == thread_id), None)

    def dump(self) -> str:
        """A plain-text picture of the whole structure, for debugging."""
        current = self.current_thread
        lines = [
            f"Chat {self.chat.pk} {self.chat.title!r} (owner {self.chat.owner.get_username()})",
            f"  members: {', '.join(a.name for a in self.members) or '(none)'}",
            f"  page: {len(self.messages)} messages, oldest id {self.oldest_id}, more before: {self.has_more}",
        ]
        for view in self.threads:
            marker = "*" if current is not None and view is current else " "
            lines.append(f" {marker}thread {view.id if view.id is not None else '-'} {view.title!r}")
            for label, items in (("messages", view.messages), ("notes", view.notes), ("resources", view.resources)):
                lines.append(f"    {label}: {len(items)}")
                for m in items:
                    sender = m.sender_agent.name if m.sender_agent_id else "user"
                    text = " ".join(m.content.split())
                    text = text if len(text) <= 60 else text[:57] + "..."
                    sub = f"/{m.subkind}" if m.subkind else ""
                    lines.append(f"      #{m.pk} [{m.kind}{sub} {m.status}] {sender}: {text}")
        return "\n".join(lines)


ANY_THREAD = object()


# A page of messages shows each sender's name and avatar (events.sender_payload). The rest of an
# agent's row (its prompt, settings and tools) was read and decoded for every message of a page.
UNSHOWN_SENDER_FIELDS = (
    "sender_agent__system_prompt", "sender_agent__settings", "sender_agent__tools", "sender_agent__description",
    "sender_agent__base_url", "sender_user__password",
)


def _with_senders(messages):
    return messages.select_related("sender_agent", "sender_user").defer(*UNSHOWN_SENDER_FIELDS)


def _messages_of(chat: Chat):
    return _with_senders(Message.objects.filter(chat=chat))


def message_page(*, chat: Chat, before_id: int | None = None, after_id: int | None = None,
                 page_size: int | None = None, thread_id=ANY_THREAD) -> tuple[list[Message], bool]:
    """A page of a chat's messages in id order, and whether more exist beyond it.

    With after_id: the oldest messages after it (catching up); otherwise the newest before
    before_id (or the newest of all). thread_id keeps one thread (None: the default thread).
    """
    size = page_size or settings.MESSAGE_PAGE_SIZE
    rows = _messages_of(chat)
    if thread_id is not ANY_THREAD:
        rows = rows.filter(thread_id=thread_id)
    if after_id is not None:
        page = list(rows.filter(pk__gt=after_id).order_by("id")[: size + 1])
        return page[:size], len(page) > size
    if before_id is not None:
        rows = rows.filter(pk__lt=before_id)
    page = list(rows.order_by("-id")[: size + 1])
    has_more = len(page) > size
    return list(reversed(page[:size])), has_more


def chat_view(*, chat: Chat, before_id: int | None = None, page_size: int | None = None) -> ChatView:
    """The ChatView of a chat the caller already fetched with chat_for_user."""
    messages, has_more = message_page(chat=chat, before_id=before_id, page_size=page_size)
    views = {None: ThreadView(thread=None)}
    for thread in chat.threads.order_by("created_at", "id"):
        views[thread.pk] = ThreadView(thread=thread)
    for message in messages:
        views.setdefault(message.thread_id, ThreadView(thread=message.thread)).add(message)
    return ChatView(chat=chat, messages=messages, threads=list(views.values()), has_more=has_more,
                    members=members_of(chat=chat))


def thread_history(*, chat: Chat, thread_id: int | None, before_id: int | None = None) -> list[Message]:
    """Every message of one thread in id order (what an agent reads), up to before_id. Their
    senders are not joined: a turn has its own agent already (agents_app.turns.inputs)."""
    if before_id is None:
        return THREAD_HISTORY.fetch(chat=chat.pk, thread=thread_id)
    return list(Message.objects.filter(chat=chat, thread_id=thread_id, pk__lt=before_id).order_by("id"))


# Read at every turn's start: its SQL is built once (hub.prepared).
THREAD_HISTORY = PreparedRead(lambda: Message.objects.order_by("id"), "chat", "thread")



# --- The chat page: threads as previews, one thread's pages, catch-up by id --------------------

@dataclass
class ThreadSummary:
    """A thread as the chat page's collapsed preview shows it. thread None is the default thread."""

    thread: Thread | None
    last_message: Message | None
    message_count: int
    last_question: Message | None = None  # the user's last message: with last_message, the last exchange

    @property
    def last_activity(self):
        times = [t for t in (self.thread.last_activity_at if self.thread else None,
                             self.last_message.created_at if self.last_message else None) if t]
        return max(times) if times else None


def thread_summaries(*, chat: Chat) -> list[ThreadSummary]:
    """Every thread of the chat with its last message (conversation or note), least recent first.

    The default thread is listed only when it holds messages. Three queries, whatever the size.
    """
    from django.db.models import Count, Max, Q

    shown = [Message.Kind.MESSAGE, Message.Kind.NOTE]
    asked = Q(kind=Message.Kind.MESSAGE, sender_agent__isnull=True)
    stats = {
        row["thread_id"]: row
        for row in Message.objects.filter(chat=chat, kind__in=shown)
        .values("thread_id").annotate(last_id=Max("id"), count=Count("id"), question_id=Max("id", filter=asked))
    }
    wanted = {row["last_id"] for row in stats.values()} | {row["question_id"] for row in stats.values()}
    by_id = {m.pk: m for m in _with_senders(Message.objects.filter(pk__in=wanted - {None}))}

    def summary(thread, key):
        row = stats.get(key, {})
        return ThreadSummary(thread=thread, last_message=by_id.get(row.get("last_id")),
                             message_count=row.get("count", 0), last_question=by_id.get(row.get("question_id")))

    summaries = [summary(t, t.pk) for t in chat.threads.all()]
    if None in stats:
        summaries.append(summary(None, None))
    epoch = chat.created_at
    return sorted(summaries, key=lambda s: (s.last_activity or epoch, s.thread.pk if s.thread else 0))


# Ids are 64-bit: a larger number names no row (and SQLite cannot even compare one with a column).
LARGEST_ID = 2**63 - 1


def messages_by_ids(*, chat: Chat, ids) -> list[Message]:
    """The chat's messages with these ids (others' and unknown ids are left out), in id order."""
    known = [i for i in list(ids)[:200] if 0 < i <= LARGEST_ID]
    return list(_messages_of(chat).filter(pk__in=known).order_by("id"))


def messages_edited_since(*, chat: Chat, since) -> list[Message]:
    """The chat's messages edited after `since` (a reconnecting tab missed their message.edited)."""
    return list(_messages_of(chat).filter(edited_at__gt=since).order_by("id")[:200])


# --- Share links ------------------------------------------------------------------------------

def live_share_by_token(token) -> ShareLink | None:
    """The share link of that token if it still shows its chat (not revoked, chat not in the trash
    nor purged); else None. Anyone may ask: it is the shared page's only read.

    A guessed, malformed or revoked token takes the same single indexed lookup and gives the same
    None: nothing about the token's shape is checked first, so no answer comes back sooner.
    """
    return (ShareLink.objects.filter(token=str(token), revoked_at__isnull=True, chat__deleted_at__isnull=True)
            .only("title", "snapshot", "created_at").first())


def shares_of_user(*, user, chat: Chat | None = None, limit: int = 50, before: int | None = None):
    """(the user's live share links — of one chat, or of every chat not in the trash — newest first,
    with their chat's title; whether older ones remain). `before` is the id of the last link shown."""
    links = ShareLink.objects.filter(chat__owner=user, chat__deleted_at__isnull=True, revoked_at__isnull=True)
    if chat is not None:
        links = links.filter(chat=chat)
    if before is not None:
        links = links.filter(pk__lt=min(before, LARGEST_ID + 1))
    rows = list(links.select_related("chat").only("chat__title", "chat__owner_id", "token", "title",
                                                  "include_notes", "include_memory", "created_at", "revoked_at",
                                                  "chat_id").order_by("-id")[: limit + 1])
    return rows[:limit], len(rows) > limit


def share_for_user(*, user, share_id) -> ShareLink:
    """The user's share link with that id (revoked, or of a chat in the trash, too); another user's,
    or a malformed id, is NotFound."""
    try:
        share_id = int(share_id)
        if not 0 < share_id <= LARGEST_ID:
            raise ValueError(share_id)
        return ShareLink.objects.select_related("chat").get(pk=share_id, chat__owner=user)
    except (ShareLink.DoesNotExist, ValueError, TypeError):
        raise NotFound("no such share link") from None
