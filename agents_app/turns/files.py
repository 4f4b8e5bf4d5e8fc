"""The files of a turn's thread in its input. Each message's files go with the message, after the
user's words: a file's text (chats.attachments.context: whole when short, the passages that best
answer the turn's question when long) and an image as an image part when the agent's model sees
images, its name when it does not. A file's text is the user's content, never instructions: it
is untrusted, like anything else the user pasted.

A checkpoint keeps the turn's messages without the images' bytes (without_image_data); a
continuation reads them again from storage (with_image_data)."""

import base64
import copy
import logging
import re

from django.conf import settings
from pydantic_ai.messages import BinaryContent

from chats.attachments.context import file_text
from chats.attachments.files import file_payload, megabytes, shown_inline, uuid_or_none
from chats.models import Attachment, Message

log = logging.getLogger(__name__)

# The most characters of file text one turn's input holds; past it a file is named, not read.
TURN_FILE_CHARS = 32_000
IMAGES_PER_TURN = 8
IMAGE_ID_PREFIX = "hub-file:"
# Model names that take images, for an agent whose settings do not say ("vision": true/false).
VISION_MODELS = re.compile(
    r"gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|\bo[134](?:-|$)|claude-(?:3|opus|sonnet|haiku)|gemini|llava|vision|"
    r"pixtral|gemma-?3|llama-?4|qwen[\d.]*-?vl|minicpm-v|moondream|granite3\.2-vision",
    re.IGNORECASE,
)


def sees_images(agent) -> bool:
    """Whether the agent's model is sent images: its settings' "vision" when set, else a guess from
    the model's name."""
    configured = agent.settings.get("vision") if isinstance(agent.settings, dict) else None
    if isinstance(configured, bool):
        return configured
    return bool(VISION_MODELS.search(agent.model or ""))


def image_part_bytes() -> int:
    return int(settings.HUB_IMAGE_PART_MB * 1024 * 1024)


class ThreadFiles:
    """The files of a turn's messages, read once, newest message's first against the turn's budget:
    the question's own files are never the ones left out."""

    def __init__(self, run, messages: list[Message]):
        """messages: the thread's; the trigger's files are read whether it is among them or not."""
        self.run = run
        self.vision = sees_images(run.agent)
        self.question = run.trigger_message.content if run.trigger_message else ""
        # Only messages whose data lists files have any: a thread without files costs no query.
        ids = [m.pk for m in messages if m.kind == Message.Kind.MESSAGE and (m.data or {}).get("files")]
        trigger = run.trigger_message
        if trigger is not None and (trigger.data or {}).get("files"):
            ids.append(trigger.pk)
        rows = (Attachment.objects.filter(message_id__in=ids, chat_id=run.chat_id).order_by("-message_id", "created_at")
                if ids else [])
        self.by_message: dict[int, list] = {}
        self.chars_left, self.images_left = TURN_FILE_CHARS, IMAGES_PER_TURN
        for attachment in rows:
            self.by_message.setdefault(attachment.message_id, []).append(self._part(attachment))

    def parts_for(self, message: Message) -> list:
        return self.by_message.get(message.pk, [])

    def _part(self, attachment: Attachment):
        if shown_inline(attachment.content_type):
            return self._image_part(attachment)
        if attachment.text_status == Attachment.TextStatus.UNREADABLE:
            return _about(attachment, f"could not be read ({attachment.text_note or 'no text'})")
        if attachment.text_status != Attachment.TextStatus.READ:
            return _about(attachment, "still being read; its text is not there yet")
        if self.chars_left <= 0:
            return _about(attachment, "its text is left out: this turn holds enough file text; search the files for it")
        text = file_text(attachment, question=self.question)
        body = text.text[:self.chars_left]
        self.chars_left -= len(body)
        how = "whole" if text.whole and len(body) == len(text.text) else "passages for the question"
        return _wrapped(attachment, body, how)

    def _image_part(self, attachment: Attachment):
        if not self.vision:
            return _about(attachment, "an image; this model does not see images")
        if attachment.size > image_part_bytes():
            return _about(attachment, f"an image too large to show ({megabytes(attachment.size)})")
        if self.images_left <= 0:
            return _about(attachment, "an image left out: this turn already shows enough")
        self.images_left -= 1
        return _image(attachment) or _about(attachment, "an image that could not be read")


def _attributes(attachment: Attachment) -> str:
    name = attachment.name.replace('"', "'")
    return f'name="{name}" type="{attachment.content_type}" link="{file_payload(attachment)["url"]}"'


def _about(attachment: Attachment, what: str) -> str:
    return f"<file {_attributes(attachment)}>({what})</file>"


def _wrapped(attachment: Attachment, body: str, how: str) -> str:
    body = body.replace("</file>", "</ file>")  # the file's text cannot close its own tag
    pages = f' pages="{attachment.pages}"' if attachment.pages > 1 else ""
    return f'<file {_attributes(attachment)}{pages} text="{how}">\n{body}\n</file>'


def _image(attachment: Attachment) -> BinaryContent | None:
    data = _image_bytes(attachment)
    if data is None:
        return None
    return BinaryContent(data=data, media_type=attachment.content_type, identifier=f"{IMAGE_ID_PREFIX}{attachment.pk}")


def _image_bytes(attachment: Attachment | None) -> bytes | None:
    """An image's bytes from storage; None when it is gone, too large or cannot be read."""
    if attachment is None or attachment.size > image_part_bytes():
        return None
    try:
        with attachment.file.open("rb") as stored:
            return stored.read(image_part_bytes() + 1)
    except OSError:
        log.warning("file %s: its image could not be read from storage", attachment.pk, exc_info=True)
        return None


def without_image_data(history_json: list) -> list:
    """The turn's messages as a checkpoint keeps them: each of the hub's images without its bytes."""
    for part in _user_parts(history_json):
        for item in part["content"]:
            if isinstance(item, dict) and str(item.get("identifier") or "").startswith(IMAGE_ID_PREFIX):
                item["data"] = ""
    return history_json


def with_image_data(history_json: list) -> list:
    """A copy of a checkpoint's messages with each image's bytes read again (an image gone since is
    named). A copy: the turn keeps the checkpoint's own list, which later checkpoints store again."""
    restored = copy.deepcopy(history_json)
    for part in _user_parts(restored):
        part["content"] = [_restored(item) for item in part["content"]]
    return restored


def _restored(item):
    identifier = str(item.get("identifier") or "") if isinstance(item, dict) else ""
    if not identifier.startswith(IMAGE_ID_PREFIX) or item.get("data"):
        return item
    pk = uuid_or_none(identifier.removeprefix(IMAGE_ID_PREFIX))
    data = _image_bytes(Attachment.objects.filter(pk=pk).first() if pk else None)
    if data is None:
        return "(an image attached here has been removed)"
    return {**item, "data": base64.b64encode(data).decode()}


def _user_parts(history_json: list):
    """The user prompts of a checkpoint's messages that hold more than text."""
    for message in history_json:
        for part in message.get("parts", []) if isinstance(message, dict) else []:
            if part.get("part_kind") == "user-prompt" and isinstance(part.get("content"), list):
                yield part
