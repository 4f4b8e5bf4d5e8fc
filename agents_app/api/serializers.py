"""Input of the agents and runs API, and the documented shape of its answers.

Answers are built by agents_app.api.payloads; these output serializers describe them for the
OpenAPI schema (schemathesis checks every answer against it).
"""

from rest_framework import serializers

from agents_app.models import Agent, Run


class AgentOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    avatar = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_blank=True)
    model = serializers.CharField(help_text="e.g. openai:gpt-4.1-mini, anthropic:…, ollama:…, builtin:librarian")
    base_url = serializers.CharField(allow_blank=True)
    system_prompt = serializers.CharField(allow_blank=True)
    settings = serializers.DictField(help_text="temperature, max_tokens, …")
    tools = serializers.ListField(child=serializers.CharField())
    reply_policy = serializers.ChoiceField(Agent.ReplyPolicy.values)
    recovery_policy = serializers.ChoiceField(Agent.RecoveryPolicy.values)
    shared = serializers.BooleanField(help_text="Made by staff for every user; not editable.")
    editable = serializers.BooleanField(help_text="Yours: you may change and delete it.")
    main_chat_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()


class AgentListOut(serializers.Serializer):
    results = AgentOut(many=True)


class AgentIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    model = serializers.CharField(max_length=200)
    avatar = serializers.CharField(max_length=500, required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    base_url = serializers.URLField(required=False, allow_blank=True, max_length=200)
    system_prompt = serializers.CharField(required=False, allow_blank=True, max_length=100_000, trim_whitespace=False)
    settings = serializers.DictField(required=False)
    tools = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)
    reply_policy = serializers.ChoiceField(Agent.ReplyPolicy.values, required=False)
    recovery_policy = serializers.ChoiceField(Agent.RecoveryPolicy.values, required=False)


class AgentPatch(AgentIn):
    name = serializers.CharField(max_length=100, required=False)
    model = serializers.CharField(max_length=200, required=False)


class RunOut(serializers.Serializer):
    id = serializers.UUIDField()
    chat_id = serializers.UUIDField()
    thread_id = serializers.IntegerField(allow_null=True)
    agent_id = serializers.IntegerField()
    kind = serializers.ChoiceField(Run.Kind.values)
    status = serializers.ChoiceField(Run.Status.values)
    attempt = serializers.IntegerField()
    trigger_message_id = serializers.IntegerField(allow_null=True)
    reply_message_id = serializers.IntegerField(allow_null=True)
    parent_id = serializers.UUIDField(allow_null=True, help_text="The run that delegated this one.")
    continues_id = serializers.UUIDField(allow_null=True, help_text="The run this one continues after a recovery.")
    cancel_requested = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True)
    usage = serializers.DictField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RunListOut(serializers.Serializer):
    results = RunOut(many=True)


class CancelOut(serializers.Serializer):
    cancelled = serializers.BooleanField(help_text="False: the run had already finished.")
    run = RunOut()
