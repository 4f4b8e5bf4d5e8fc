"""Agents and their turns: the registry, run rows (the checkpoints) and remotes."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Agent(models.Model):
    class ReplyPolicy(models.TextChoices):
        ALWAYS = "always", "Answers every user message"
        MENTIONED = "mentioned", "Answers only when @mentioned"
        NEVER = "never", "Never answers"

    class RecoveryPolicy(models.TextChoices):
        CONTINUE = "continue", "Keep the partial reply and continue it"
        RETRY = "retry", "Drop the partial reply and start again"
        STOP = "stop", "Keep the partial reply and stop"

    # settings["continuation"]: how a language model is asked for the rest of an interrupted
    # reply (agents_app.continuations, which imports pydantic-ai: so the choices live here, where
    # validating an agent in a web process does not load the model libraries).
    CONTINUATIONS = ("prefix", "instruction")

    # No owner: made by staff, every user may add it to their chats.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(max_length=100)
    avatar = models.CharField(max_length=500, blank=True, help_text="An image URL or an emoji.")
    description = models.TextField(blank=True)
    model = models.CharField(max_length=200, help_text="e.g. openai:gpt-4.1-mini or builtin:librarian")
    base_url = models.URLField(blank=True)
    # Staff only, for a shared agent: its base URL may be a private or local address (a model
    # server on the hub's own network). Users' agents never may (agents_app.outbound).
    allow_private_network = models.BooleanField(
        default=False, help_text="Shared agents only: the base URL may be a private or local network address."
    )
    system_prompt = models.TextField(blank=True)
    settings = models.JSONField(default=dict, blank=True, help_text="temperature, max_tokens, …")
    tools = models.JSONField(default=list, blank=True)
    reply_policy = models.CharField(max_length=16, choices=ReplyPolicy.choices, default=ReplyPolicy.ALWAYS)
    recovery_policy = models.CharField(
        max_length=16, choices=RecoveryPolicy.choices, default=RecoveryPolicy.CONTINUE
    )
    main_chat = models.ForeignKey(
        "chats.Chat", null=True, blank=True, on_delete=models.SET_NULL, related_name="main_of"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(reply_policy__in=["always", "mentioned", "never"]), name="agent_reply_policy_valid"
            ),
            models.CheckConstraint(
                condition=Q(recovery_policy__in=["continue", "retry", "stop"]),
                name="agent_recovery_policy_valid",
            ),
        ]

    def __str__(self):
        return self.name


class Run(models.Model):
    """The checkpoint row of one agent turn; its status is changed only by agents_app.turns.runs."""

    class Kind(models.TextChoices):
        REPLY = "reply"
        CONTINUE = "continue"
        DELEGATE = "delegate"
        REGENERATE = "regenerate"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        RECOVERED = "recovered"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.RECOVERED)
    LIVE = (Status.QUEUED, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="runs")
    thread = models.ForeignKey("chats.Thread", null=True, blank=True, on_delete=models.CASCADE, related_name="runs")
    trigger_message = models.ForeignKey(
        "chats.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="triggered_runs"
    )
    reply_message = models.ForeignKey(
        "chats.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    continues = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continuations"
    )
    # For a delegated run: the parent's tool call that asked for it, so a recovered parent finds
    # this child again instead of starting a second one.
    parent_tool_call_id = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REPLY)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    checkpoint = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    usage = models.JSONField(default=dict, blank=True)
    # What the provider reported for the run's requests (the usage above, in columns) and whose
    # chat it was: a user's tokens per agent and per day are summed from these (agents_app.usage).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        db_index=False,  # run_owner_finished serves it
    )
    model = models.CharField(max_length=200, blank=True, help_text="The model name the provider reported.")
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    history = models.JSONField(default=list, blank=True, help_text="Every state change with its time and worker.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Counted in the worker's memory and stored with each checkpoint write (never a write per
    # delta): how many delta events this run sent and how many checkpoints it wrote.
    delta_count = models.PositiveIntegerField(default=0)
    checkpoint_count = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            # The sweeper's scan: live runs by lease expiry.
            models.Index(fields=["status", "lease_expires_at"], name="run_status_lease"),
            models.Index(fields=["chat", "-created_at"], name="run_chat_created"),
            # The admin's list of runs, newest first.
            models.Index(fields=["-created_at"], name="run_created"),
            # A user's tokens since a time (the monthly limit, the Usage page); on PostgreSQL the
            # index holds the counts too, so the limit's sum reads the index only.
            models.Index(fields=["owner", "finished_at"], include=["input_tokens", "output_tokens"],
                         name="run_owner_finished"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["reply", "continue", "delegate", "regenerate"]), name="run_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "cancelled", "recovered"]),
                name="run_status_valid",
            ),
        ]

    def __str__(self):
        return f"{self.kind} run {self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class Worker(models.Model):
    """A Celery worker process as it last reported itself (agents_app.workers writes these)."""

    name = models.CharField(max_length=200, unique=True, help_text="The Celery node name, e.g. celery@host.")
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    # The processes that run turns: the worker itself (threads pool) or its pool children.
    pids = models.JSONField(default=list, blank=True)
    pool = models.CharField(max_length=50, blank=True)
    concurrency = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.name


class Remote(models.Model):
    class Kind(models.TextChoices):
        MCP = "mcp"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="remotes")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MCP)
    url = models.URLField()
    # Secret: encrypted (agents_app.secrets.seal_headers), never rendered, serialised or logged.
    encrypted_headers = models.TextField(blank=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(kind__in=["mcp"]), name="remote_kind_valid")]

    def __str__(self):
        return self.name


class ProviderKey(models.Model):
    """A user's own API key for a provider, stored encrypted (agents_app.secrets)."""

    class Provider(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        ANTHROPIC = "anthropic", "Anthropic"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_keys")
    provider = models.CharField(max_length=32, choices=Provider.choices)
    encrypted_key = models.TextField()
    # The last four characters, so a user can tell their keys apart without seeing them.
    hint = models.CharField(max_length=8, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "provider"], name="provider_key_unique")]

    def __str__(self):
        return f"{self.provider} key …{self.hint}"


class TemporaryChatUsage(models.Model):
    """The tokens of a run in a temporary chat, kept in the hub's database: the run itself lives in
    the chat's image (and its token columns stay empty there, saved or not), so a user's usage and
    monthly limit count these beside the stored runs' (agents_app.usage)."""

    run_id = models.UUIDField(unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+",
                              db_index=False)  # temporary_usage_owner_finished serves it
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    finished_at = models.DateTimeField()
    model = models.CharField(max_length=200, blank=True, help_text="The model name the provider reported.")
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "temporary chat usage"
        indexes = [
            models.Index(fields=["owner", "finished_at"], include=["input_tokens", "output_tokens"],
                         name="temporary_usage_owner_finished"),
        ]

    def __str__(self):
        return f"{self.input_tokens + self.output_tokens} tokens of run {self.run_id}"
