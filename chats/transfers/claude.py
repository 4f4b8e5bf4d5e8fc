"""Claude's conversations.json: one entry, as an ImportedConversation.

An entry has uuid, name, created_at and updated_at (ISO 8601) and chat_messages, each with
sender ("human" or "assistant"), text and/or content blocks, created_at, attachments (with the
text Claude extracted from them) and files (names only; Claude's export has no file bytes).
A message's text blocks are kept; the names of its attachments and files follow its text.
"""

from chats.transfers.conversations import ImportedConversation, ImportedMessage, SkipEntry, clean_text, iso_time

ROLES = {"human": "user", "assistant": "assistant"}


def read_conversation(entry) -> ImportedConversation:
    if not isinstance(entry, dict):
        raise SkipEntry("is not an object")
    chat_messages = entry.get("chat_messages")
    if not isinstance(chat_messages, list):
        raise SkipEntry("chat_messages is not a list")
    messages = [m for m in (_message(item, i) for i, item in enumerate(chat_messages, start=1)) if m is not None]
    name = entry.get("name")
    return ImportedConversation(
        title=clean_text(name) if isinstance(name, str) else "",
        created_at=iso_time(entry.get("created_at"), "created_at"),
        updated_at=iso_time(entry.get("updated_at"), "updated_at"),
        messages=messages,
    )


def _message(item, number: int) -> ImportedMessage | None:
    where = f"message {number}"
    if not isinstance(item, dict):
        raise SkipEntry(f"{where} is not an object")
    role = ROLES.get(item.get("sender"))
    if role is None:
        raise SkipEntry(f"{where}: sender is not human or assistant")
    text = _text(item, where)
    names = _file_names(item)
    if names:
        text = f"{text}\n\n*Attached: {', '.join(names)}*" if text.strip() else f"*Attached: {', '.join(names)}*"
    if not text.strip():
        return None
    data = {"imported_from": "claude"}
    if names:
        data["attachment_names"] = names
    return ImportedMessage(role=role, content=clean_text(text), created_at=iso_time(item.get("created_at"),
                                                                                     f"{where}: created_at"), data=data)


def _text(item: dict, where: str) -> str:
    content = item.get("content")
    if isinstance(content, list) and content:
        texts = [block.get("text") for block in content if isinstance(block, dict) and block.get("type") == "text"]
        if any(not isinstance(t, str) for t in texts):
            raise SkipEntry(f"{where}: a text block's text is not text")
        if texts:
            return "\n\n".join(texts)
    text = item.get("text", "")
    if not isinstance(text, str):
        raise SkipEntry(f"{where}: text is not text")
    return text


def _file_names(item: dict) -> list[str]:
    names = []
    for key in ("attachments", "files"):
        for attached in item.get(key) or []:
            if isinstance(attached, dict):
                name = attached.get("file_name") or attached.get("name")
                if isinstance(name, str) and name.strip():
                    names.append(clean_text(name.strip())[:200])
    return names
