"""Input of the conversations API, and the documented shape of its answers.

Answers are built by chats.events payload functions (the same JSON the websocket sends) or
chats.api.payloads; these output serializers describe them for the OpenAPI schema.
"""

from django.conf import settings
from rest_framework import serializers

from chats.models import Message


class SenderOut(serializers.Serializer):
    type = serializers.ChoiceField(["user", "agent"])
    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    avatar = serializers.CharField(allow_blank=True)


class ReplyUsageOut(serializers.Serializer):
    model = serializers.CharField(allow_blank=True, help_text="The model name the provider reported")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    requests = serializers.IntegerField(help_text="Model requests made for the reply (tool calls make more)")


class MessageOut(serializers.Serializer):
    id = serializers.IntegerField()
    chat_id = serializers.UUIDField()
    thread_id = serializers.IntegerField(allow_null=True, help_text="None: the chat's main thread.")
    sender = SenderOut()
    kind = serializers.ChoiceField(Message.Kind.values)
    subkind = serializers.CharField(allow_blank=True, help_text="e.g. reasoning, tool, remote")
    format = serializers.ChoiceField(Message.Format.values)
    content = serializers.CharField(allow_blank=True)
    data = serializers.DictField()
    status = serializers.ChoiceField(Message.Status.values)
    run_id = serializers.UUIDField(allow_null=True)
    reply_to_id = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    edited_at = serializers.DateTimeField(allow_null=True)
    usage = ReplyUsageOut(allow_null=True, help_text="An agent's reply: its model and the tokens in and out its "
                     "provider reported (all requests made for it); None otherwise")


class ThreadOut(serializers.Serializer):
    id = serializers.IntegerField()
    chat_id = serializers.UUIDField()
    title = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField()


class MemberOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    avatar = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_blank=True)
    reply_policy = serializers.ChoiceField(
        choices=["always", "mentioned", "never"],
        help_text="always: answers every message of the user that @mentions no other agent; mentioned: only when "
                  "@mentioned; never",
    )
    model = serializers.CharField(help_text="provider:model, e.g. openai:gpt-4.1-mini")
    owned = serializers.BooleanField(help_text="The chat's owner owns the agent (and may switch its model)")


class ChatOut(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    picture = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    last_message_preview = serializers.CharField(allow_blank=True)
    deleted_at = serializers.DateTimeField(allow_null=True, help_text="Set while the chat is in the trash.")
    forked_from = serializers.UUIDField(allow_null=True)
    kind = serializers.ChoiceField(["stored", "temporary"],
                                   help_text="temporary: kept out of the database, gone after HUB_TEMPORARY_HOURS")
    expires_at = serializers.DateTimeField(allow_null=True, help_text="When a temporary chat goes, unless it changes")
    pinned_at = serializers.DateTimeField(allow_null=True, help_text="Set while the chat is pinned (heads the list).")
    archived_at = serializers.DateTimeField(allow_null=True,
                                            help_text="Set while the chat is archived (out of the list, searchable).")
    folder_id = serializers.IntegerField(allow_null=True, help_text="The folder the chat is in.")
    tags = serializers.ListField(child=serializers.CharField(), required=False,
                                 help_text="Its tags' names (left out of live events that do not change them).")


class ChatDetailOut(ChatOut):
    members = MemberOut(many=True)
    threads = ThreadOut(many=True)


class ChatPageOut(serializers.Serializer):
    results = ChatOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as `before` for the next page.")


class ChatListQuery(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=settings.DIRECTORY_PAGE_MAX, default=50)
    before = serializers.CharField(required=False, max_length=200, help_text="next_cursor of the previous page")
    q = serializers.CharField(required=False, allow_blank=True, max_length=500,
                              help_text="Words that must all be in the title or description")
    trash = serializers.BooleanField(default=False, help_text="List the trash instead")
    archived = serializers.BooleanField(default=False, help_text="List the archive instead, newest archived first")
    folder = serializers.IntegerField(required=False, help_text="Only the chats in this folder of yours")
    tag = serializers.CharField(required=False, max_length=100, help_text="Only the chats with this tag (its name)")


class ChatIn(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=settings.HUB_MAX_TITLE_CHARS)
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    picture = serializers.CharField(required=False, allow_blank=True, max_length=500)
    agent_ids = serializers.ListField(child=serializers.IntegerField(), required=False, max_length=50,
                                      help_text="Agents to add as members (yours or shared ones)")
    temporary = serializers.BooleanField(default=False, help_text="Keep the chat out of the database (in Redis) "
                                         "until it is saved; it goes HUB_TEMPORARY_HOURS after its last change")


class ChatPatch(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=settings.HUB_MAX_TITLE_CHARS)
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)
    picture = serializers.CharField(required=False, allow_blank=True, max_length=500)
    pinned = serializers.BooleanField(required=False, help_text="Pin to the head of the list, or unpin")
    archived = serializers.BooleanField(required=False, help_text="Archive (out of the list, still searchable), "
                                        "or restore from the archive")
    folder = serializers.IntegerField(required=False, allow_null=True, help_text="A folder of yours, or null for none")
    tags = serializers.ListField(child=serializers.CharField(max_length=100, allow_blank=True), required=False,
                                 max_length=100, help_text="The chat's tags by name (the whole list; new names "
                                 "make tags)")


class FolderOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    instructions = serializers.CharField(allow_blank=True, help_text="Read by every agent in the folder's chats")
    created_at = serializers.DateTimeField()


class FolderListOut(serializers.Serializer):
    results = FolderOut(many=True)


class FolderIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    instructions = serializers.CharField(required=False, allow_blank=True, max_length=100_000)


class FolderPatch(serializers.Serializer):
    name = serializers.CharField(required=False, max_length=200)
    instructions = serializers.CharField(required=False, allow_blank=True, max_length=100_000)


class TagOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    chat_count = serializers.IntegerField(help_text="Chats with this tag, not counting the trash")


class TagListOut(serializers.Serializer):
    results = TagOut(many=True)


class ForkIn(serializers.Serializer):
    message_id = serializers.IntegerField(help_text="The fork keeps the messages up to and including this one.")
    title = serializers.CharField(required=False, allow_blank=True, max_length=settings.HUB_MAX_TITLE_CHARS)


class ExportQuery(serializers.Serializer):
    format = serializers.ChoiceField(["json", "markdown"], default="json")


class ThreadListOut(serializers.Serializer):
    results = ThreadOut(many=True)


class MessagePageQuery(serializers.Serializer):
    before = serializers.IntegerField(required=False, min_value=0, help_text="Page back: messages before this id")
    after = serializers.IntegerField(required=False, min_value=0,
                                     help_text="Catch up: the oldest messages after this id")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200)

    def validate(self, attrs):
        if "before" in attrs and "after" in attrs:
            raise serializers.ValidationError({"after": ["give before or after, not both"]})
        return attrs


class MessagePageOut(serializers.Serializer):
    results = MessageOut(many=True, help_text="Oldest first.")
    has_more = serializers.BooleanField(help_text="More messages exist beyond this page.")


class FileOut(serializers.Serializer):
    id = serializers.UUIDField()
    chat_id = serializers.UUIDField()
    message_id = serializers.IntegerField(allow_null=True, help_text="None until a message is sent with it.")
    name = serializers.CharField()
    content_type = serializers.CharField(help_text="From the file's first bytes, not its name.")
    size = serializers.IntegerField()
    image = serializers.BooleanField(help_text="A raster image, shown inline.")
    text_status = serializers.ChoiceField(["pending", "reading", "read", "unreadable"])
    text_note = serializers.CharField(allow_blank=True, help_text="Why it could not be read, or where reading stopped.")
    pages = serializers.IntegerField()
    url = serializers.CharField(help_text="The page's download address (session log-in).")


class StorageOut(serializers.Serializer):
    used = serializers.IntegerField(help_text="Bytes of all your files.")
    limit = serializers.IntegerField(help_text="HUB_USER_STORAGE_MB in bytes.")
    max_file = serializers.IntegerField(help_text="HUB_MAX_UPLOAD_MB in bytes.")


class FileListOut(serializers.Serializer):
    results = FileOut(many=True)
    storage = StorageOut()


class FileUploadIn(serializers.Serializer):
    file = serializers.ListField(child=serializers.FileField(), help_text="One or several files (multipart).")


class MessageIn(serializers.Serializer):
    content = serializers.CharField(max_length=settings.HUB_MAX_MESSAGE_CHARS, trim_whitespace=False,
                                    allow_blank=True, default="")
    files = serializers.ListField(child=serializers.CharField(max_length=40), required=False, max_length=10,
                                  help_text="Ids of files uploaded to this chat and not yet sent")
    thread_id = serializers.IntegerField(required=False, allow_null=True)
    new_thread_title = serializers.CharField(required=False, max_length=settings.HUB_MAX_TITLE_CHARS)
    kind = serializers.ChoiceField(["message", "note"], default="message")
    client_id = serializers.CharField(required=False, max_length=100, help_text="Echoed in message.created")


class SendQuery(serializers.Serializer):
    stream = serializers.BooleanField(default=False, help_text="Answer with Server-Sent Events of the replies")


class MessageEdit(serializers.Serializer):
    content = serializers.CharField(max_length=settings.HUB_MAX_MESSAGE_CHARS, trim_whitespace=False)


class FeedbackIn(serializers.Serializer):
    rating = serializers.ChoiceField(choices=["up", "down"], allow_null=True,
                                     help_text="up, down, or null to take a rating back")


class MemberIn(serializers.Serializer):
    agent_id = serializers.IntegerField()


class MemberListOut(serializers.Serializer):
    results = MemberOut(many=True)


class ShareIn(serializers.Serializer):
    include_notes = serializers.BooleanField(default=False, help_text="Show the chat's notes on the shared page")
    include_memory = serializers.BooleanField(default=False, help_text="Show your shared memory on the shared page")


class ShareListQuery(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=100, default=50)
    before = serializers.IntegerField(required=False, min_value=1, help_text="next_cursor of the previous page")


class ShareOut(serializers.Serializer):
    id = serializers.IntegerField()
    chat_id = serializers.UUIDField()
    title = serializers.CharField(help_text="The chat's title when it was shared")
    url = serializers.CharField(help_text="The shared page's path: anyone with it can read the snapshot")
    include_notes = serializers.BooleanField()
    include_memory = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)


class SharePageOut(serializers.Serializer):
    results = ShareOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)
