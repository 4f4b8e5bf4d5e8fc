"""Conversations: chats, threads, messages, memberships, attachments, shared memory and the shared index.

Models hold state and their invariants only; every write goes through chats.services.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Folder(models.Model):
    """A user's folder of chats. Its instructions are read by every agent in its chats, like a project's."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="folders")
    name = models.CharField(max_length=100)
    instructions = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="folder_unique_name")]

    def __str__(self):
        return self.name


class Tag(models.Model):
    """A label a user puts on chats, to filter the directory by."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=50)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="tag_unique_name")]

    def __str__(self):
        return self.name


class Chat(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    picture = models.CharField(max_length=500, blank=True, help_text="An image URL or an emoji.")
    # Defaults rather than auto_now_add, so fork and import can keep the original times.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    last_message_preview = models.CharField(max_length=200, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The members a chat had when it was deleted, so a restore from the trash brings them back.
    trashed_members = models.JSONField(default=list, blank=True)
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    # Pinned chats head the directory; archived ones leave it (still searchable) until restored.
    pinned_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # Deleting a folder keeps its chats: they fall back to no folder.
    folder = models.ForeignKey(Folder, null=True, blank=True, on_delete=models.SET_NULL, related_name="chats")
    tags = models.ManyToManyField(Tag, blank=True, related_name="chats")

    class Meta:
        indexes = [
            # The directory: a user's live chats, newest first, ties broken by id.
            models.Index(fields=["owner", "-updated_at", "-id"], name="chat_owner_updated"),
            # The same for a folder's chats, so a folder's page costs what a page costs.
            models.Index(fields=["folder", "-updated_at", "-id"], name="chat_folder_updated"),
            # The trash, and the purge of chats deleted long ago.
            models.Index(fields=["deleted_at"], name="chat_deleted_at", condition=models.Q(deleted_at__isnull=False)),
            # The directory's live list along its own index, so archived and pinned chats cost a page
            # nothing however many there are; the pinned ones head its first page from theirs.
            models.Index(fields=["owner", "-updated_at", "-id"], name="chat_owner_live",
                         condition=models.Q(deleted_at__isnull=True, archived_at__isnull=True,
                                            pinned_at__isnull=True)),
            models.Index(fields=["owner", "-pinned_at"], name="chat_pinned",
                         condition=models.Q(pinned_at__isnull=False)),
            # The archive's list.
            models.Index(fields=["owner", "-archived_at"], name="chat_archived",
                         condition=models.Q(archived_at__isnull=False)),
        ]

    def __str__(self):
        return self.title


class Thread(models.Model):
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["chat", "-last_activity_at"], name="thread_chat_activity")]

    def __str__(self):
        return self.title


class Message(models.Model):
    class Kind(models.TextChoices):
        MESSAGE = "message"
        LOG = "log"
        NOTE = "note"
        RESOURCE = "resource"

    class Format(models.TextChoices):
        TEXT = "text"
        MARKDOWN = "markdown"
        JSON = "json"

    class Status(models.TextChoices):
        FINAL = "final"
        STREAMING = "streaming"
        INTERRUPTED = "interrupted"
        CANCELLED = "cancelled"
        ERROR = "error"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    # No thread means the chat's default thread.
    thread = models.ForeignKey(Thread, null=True, blank=True, on_delete=models.CASCADE, related_name="messages")
    sender_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sender_agent = models.ForeignKey(
        "agents_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    subkind = models.CharField(max_length=32, blank=True)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.MARKDOWN)
    content = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.FINAL)
    run = models.ForeignKey(
        "agents_app.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="attachments",
        help_text="The reply a reasoning or tool log belongs to.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    edited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # Opening a chat and paging back: its messages by id.
            models.Index(fields=["chat", "-id"], name="message_chat_id"),
            # Replies still streaming (the admin's stuck filter, repair): a few rows among millions.
            models.Index(fields=["id"], name="message_streaming", condition=Q(status="streaming")),
            # Replies the user rated (data["feedback"], the admin's list of them): a few among millions.
            models.Index(fields=["-id"], name="message_rated", condition=Q(data__has_key="feedback")),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["message", "log", "note", "resource"]), name="message_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["final", "streaming", "interrupted", "cancelled", "error"]),
                name="message_status_valid",
            ),
            models.CheckConstraint(condition=Q(format__in=["text", "markdown", "json"]), name="message_format_valid"),
        ]

    def __str__(self):
        return f"{self.kind} #{self.pk}"

    @property
    def sent_by_user(self) -> bool:
        return self.sender_agent_id is None


class RatedReply(Message):
    """An agent's reply its user rated with a thumb (data["feedback"]): the admin's list of them."""

    class Meta:
        proxy = True
        verbose_name = "rated reply"
        verbose_name_plural = "rated replies"


def attachment_path(attachment, filename: str) -> str:
    """Where a file is stored: by owner and the attachment's id, never by the name it came with
    (two files of one name never meet, and no name can reach outside the folder)."""
    return f"files/{attachment.owner_id}/{attachment.pk}"


class Attachment(models.Model):
    """A file a user put in a chat: stored through Django's storage, attached to the message it
    was sent with (none until then), its text read off the request path."""

    class TextStatus(models.TextChoices):
        PENDING = "pending", "waiting to be read"
        READING = "reading", "being read"
        READ = "read", "read"
        UNREADABLE = "unreadable", "could not be read"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="files")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="files")
    message = models.ForeignKey("Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="files")
    file = models.FileField(upload_to=attachment_path, max_length=300)
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100, help_text="From the file's first bytes, not its name.")
    size = models.BigIntegerField()
    text_status = models.CharField(max_length=16, choices=TextStatus.choices, default=TextStatus.PENDING)
    text_note = models.CharField(
        max_length=300, blank=True, help_text="Why it could not be read, or where reading stopped."
    )
    pages = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="attachment_owner_recent")]
        constraints = [
            models.CheckConstraint(
                condition=Q(text_status__in=["pending", "reading", "read", "unreadable"]),
                name="attachment_text_status_valid",
            ),
        ]

    def __str__(self):
        return self.name


def share_token() -> str:
    """A share link's token: 256 random bits, URL-safe."""
    import secrets

    return secrets.token_urlsafe(32)


class ShareLink(models.Model):
    """A read-only snapshot of a chat, shown to anyone with its token until the owner revokes it.

    The snapshot is taken when the link is made (the chat as it was), so later messages, edits and
    deletions never reach it; notes and memory only when the owner chose them.
    """

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="share_links")
    token = models.CharField(max_length=64, unique=True, default=share_token, editable=False)
    title = models.CharField(max_length=200)
    snapshot = models.JSONField(default=dict)
    include_notes = models.BooleanField(default=False)
    include_memory = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"share of {self.title}"


def transfer_path(transfer, filename: str) -> str:
    """Where an import's upload or an export's result is kept: by owner and the transfer's id."""
    return f"transfers/{transfer.owner_id}/{transfer.pk}"


class Transfer(models.Model):
    """One import of chats from a file, or one export of chats to a file, run as a background job
    whose progress (done of total) the page shows."""

    class Kind(models.TextChoices):
        IMPORT = "import"
        EXPORT = "export"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="transfers")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # import: hub, chatgpt or claude; export: hub or markdown.
    format = models.CharField(max_length=16)
    # export: {"chat": id}, {"folder": id} or {} for every chat.
    scope = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    file = models.FileField(upload_to=transfer_path, max_length=300, blank=True)
    name = models.CharField(max_length=255, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    # What was imported and what skipped (with why), or what was exported.
    report = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"], name="transfer_owner_recent")]

    def __str__(self):
        return f"{self.kind} {self.format} ({self.status})"


class Membership(models.Model):
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="memberships")
    agent = models.ForeignKey("agents_app.Agent", on_delete=models.CASCADE, related_name="memberships")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat", "agent"], name="membership_unique_pair")]

    def __str__(self):
        return f"{self.agent} in {self.chat}"


class ContextBlock(models.Model):
    """One block of a user's shared memory, read by every chat's agents."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="context_blocks")
    label = models.CharField(max_length=100)
    description = models.CharField(max_length=500, blank=True)
    max_tokens = models.PositiveIntegerField(default=2000)
    content = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "label"], name="context_block_unique_label")]

    def __str__(self):
        return self.label


class SharedDocument(models.Model):
    """One entry of a user's shared search index, keyed by (label, key)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="shared_documents")
    label = models.CharField(max_length=100)
    key = models.CharField(max_length=300)
    content = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "label", "key"], name="shared_document_unique_key")
        ]

    def __str__(self):
        return f"{self.label}/{self.key}"


class MemoryEntry(models.Model):
    """One appended piece of a memory block, with where it came from.

    A block's content is its entries joined by newlines; `set` replaces them all with one entry.
    """

    block = models.ForeignKey(ContextBlock, on_delete=models.CASCADE, related_name="entries")
    content = models.TextField()
    chat = models.ForeignKey(Chat, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    agent = models.ForeignKey("agents_app.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "memory entries"

    def __str__(self):
        return self.content[:50]
