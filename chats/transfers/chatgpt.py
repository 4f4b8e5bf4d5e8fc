"""ChatGPT's conversations.json: one entry, as an ImportedConversation.

An entry holds a tree of nodes (`mapping`: node id -> {id, message or null, parent, children});
`current_node` is the leaf the user last saw. The conversation kept is the branch from the root
to that leaf. Hidden nodes (system prompts, custom instructions, tool calls and their output,
the model's thoughts) are left out. Where the user regenerated an answer, the other answers to
the same message are kept as earlier versions of the reply (Message.data["versions"], as Hub
keeps a regenerated reply's); what followed those other answers, and earlier edits of the user's
own messages with what followed them, are not kept (Hub has no branches).
"""

from chats.transfers.conversations import (
    ImportedConversation,
    ImportedMessage,
    SkipEntry,
    clean_text,
    unix_time,
)

KEPT_ROLES = ("user", "assistant")
# Content that is the model's working, not the conversation.
HIDDEN_CONTENT = {"thoughts", "reasoning_recap", "user_editable_context", "system_error", "model_editable_context"}
MAX_DEPTH = 100_000


def read_conversation(entry) -> ImportedConversation:
    if not isinstance(entry, dict):
        raise SkipEntry("is not an object")
    mapping = entry.get("mapping")
    if not isinstance(mapping, dict):
        raise SkipEntry("mapping is not an object")
    title = entry.get("title")
    path = _current_branch(mapping, entry.get("current_node"))
    messages = []
    for node in path:
        message = _visible_message(node)
        if message is None:
            continue
        if message.role == "assistant":
            earlier = _other_answers(mapping, node, path)
            if earlier:
                message.data["versions"] = [{"content": text} for text in earlier]
        messages.append(message)
    return ImportedConversation(
        title=clean_text(title) if isinstance(title, str) else "",
        created_at=unix_time(entry.get("create_time"), "create_time"),
        updated_at=unix_time(entry.get("update_time"), "update_time"),
        messages=messages,
    )


def _current_branch(mapping: dict, current_node) -> list[dict]:
    """The nodes from the root to current_node (or, without one, to the last leaf)."""
    if not isinstance(current_node, str) or current_node not in mapping:
        leaves = [key for key, node in mapping.items() if isinstance(node, dict) and not node.get("children")]
        if not leaves:
            return []
        current_node = leaves[-1]
    path, seen, key = [], set(), current_node
    while key is not None:
        if key in seen or len(path) > MAX_DEPTH:
            raise SkipEntry(f"mapping has a loop at node {str(key)[:40]!r}")
        seen.add(key)
        node = mapping.get(key)
        if not isinstance(node, dict):
            raise SkipEntry(f"node {str(key)[:40]!r} is not an object")
        path.append(node)
        key = node.get("parent")
        if key is not None and not isinstance(key, str):
            raise SkipEntry(f"node {str(node.get('id'))[:40]!r} has a parent that is not a node id")
    path.reverse()
    return path


def _visible_message(node: dict) -> ImportedMessage | None:
    message = node.get("message")
    if message is None:
        return None
    if not isinstance(message, dict):
        raise SkipEntry(f"node {str(node.get('id'))[:40]!r}: message is not an object")
    author = message.get("author") if isinstance(message.get("author"), dict) else {}
    role = author.get("role")
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    if role not in KEPT_ROLES or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        return None  # a call to a tool (browsing, code), not said to the user
    text = _text_of(message.get("content"), node)
    if not text.strip():
        return None
    data = {"imported_from": "chatgpt"}
    if role == "assistant" and isinstance(metadata.get("model_slug"), str):
        data["model"] = metadata["model_slug"][:100]
    return ImportedMessage(role=role, content=clean_text(text),
                           created_at=unix_time(message.get("create_time"), "a message's create_time"), data=data)


def _text_of(content, node: dict) -> str:
    """A message's text: text parts joined; code as a fenced block; images and other files as a
    [name] placeholder; the model's hidden working as nothing."""
    if not isinstance(content, dict):
        raise SkipEntry(f"node {str(node.get('id'))[:40]!r}: content is not an object")
    kind = content.get("content_type")
    if kind in HIDDEN_CONTENT:
        return ""
    if kind == "code":
        text = content.get("text") if isinstance(content.get("text"), str) else ""
        language = content.get("language") if isinstance(content.get("language"), str) else ""
        return f"```{language if language != 'unknown' else ''}\n{text}\n```" if text else ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n\n".join(p for p in (_part_text(part) for part in parts) if p)
    text = content.get("text") if isinstance(content.get("text"), str) else content.get("result")
    return text if isinstance(text, str) else ""


def _part_text(part) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):  # a voice message's transcription
            return part["text"]
        kind = str(part.get("content_type") or "file")
        return "[image]" if "image" in kind else f"[{kind.replace('_', ' ')}]"
    return ""


def _other_answers(mapping: dict, node: dict, path: list[dict]) -> list[str]:
    """The texts of the other answers to the same user message (regenerated ones), oldest first."""
    parent = mapping.get(node.get("parent")) if isinstance(node.get("parent"), str) else None
    if not isinstance(parent, dict):
        return []
    on_path = {id(n) for n in path}
    answers = []
    for child_id in parent.get("children") or []:
        child = mapping.get(child_id) if isinstance(child_id, str) else None
        if not isinstance(child, dict) or id(child) in on_path:
            continue
        text = _first_answer_below(mapping, child)
        if text:
            answers.append(text)
    return answers


def _first_answer_below(mapping: dict, node: dict) -> str:
    """The first visible assistant text on the branch that starts at node, before any user turn."""
    for _ in range(64):  # tool calls and their output stand between a question and its answer
        try:
            message = _visible_message(node)
        except SkipEntry:
            return ""
        if message is not None:
            return message.content if message.role == "assistant" else ""
        children = node.get("children") or []
        node = mapping.get(children[0]) if children and isinstance(children[0], str) else None
        if not isinstance(node, dict):
            return ""
    return ""
