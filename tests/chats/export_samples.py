"""Exports as ChatGPT and Claude make them, for tests and the imports benchmark.

chatgpt_conversation builds one entry of ChatGPT's conversations.json in its real shape: a tree
of nodes under `mapping` (a root with no message, a hidden system node, user and assistant
nodes, each message with author.role, content {content_type, parts}, create_time as Unix seconds,
metadata with the model's slug), `current_node` naming the leaf last shown. Regenerated answers
are sibling assistant nodes under one user node; an edited question is a sibling user node with
its own answer. claude_conversation builds one entry of Claude's. Every conversation n carries the
word `marker{n:05d}` so a test can find it by search.
"""

import io
import json
import random
import uuid
import zipfile

BASE_TIME = 1_700_000_000.0
WORDS = ("plan trip budget museum train coffee river garden recipe bread onion paper draft chapter "
         "server deploy query index cache review meeting summary weekend hiking route weather").split()


def marker(n: int) -> str:
    return f"marker{n:05d}"


class _Tree:
    def __init__(self, rng: random.Random, start: float):
        self.rng, self.time = rng, start
        self.mapping = {}
        self.root = self.node(None, None)

    def node(self, parent, message) -> str:
        node_id = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        if parent is not None:
            self.mapping[parent]["children"].append(node_id)
        return node_id

    def say(self, parent, role: str, text: str, *, hidden: bool = False, model: str = "gpt-4o",
            content_type: str = "text") -> str:
        self.time += self.rng.uniform(2, 40)
        metadata = {"is_visually_hidden_from_conversation": True} if hidden else {}
        if role == "assistant":
            metadata |= {"model_slug": model, "finish_details": {"type": "stop"}, "parent_id": parent}
        content = ({"content_type": "code", "language": "python", "text": text} if content_type == "code"
                   else {"content_type": content_type, "parts": [text]})
        message = {
            "id": str(uuid.UUID(int=self.rng.getrandbits(128))),
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": None if role == "system" else self.time, "update_time": None,
            "content": content, "status": "finished_successfully", "end_turn": role == "assistant",
            "weight": 1.0, "metadata": metadata, "recipient": "all", "channel": None,
        }
        return self.node(parent, message)


def chatgpt_conversation(title: str, turns: list[tuple[str, str]], *, regenerated: dict | None = None,
                         edited: dict | None = None, seed: int = 0) -> dict:
    """One entry: the turns on the current branch; regenerated {turn: [earlier answers]} adds
    sibling answers made before the kept one; edited {turn: (question, answer)} adds an earlier
    version of that question with its own answer (a branch Hub does not keep)."""
    rng = random.Random(seed)
    tree = _Tree(rng, BASE_TIME + seed * 3600)
    created = tree.time
    last = tree.say(tree.root, "system", "", hidden=True)
    for index, (question, answer) in enumerate(turns):
        if edited and index in edited:
            old_question, old_answer = edited[index]
            old = tree.say(last, "user", old_question)
            tree.say(old, "assistant", old_answer)
        asked = tree.say(last, "user", question)
        for earlier in (regenerated or {}).get(index, []):
            tree.say(asked, "assistant", earlier, model="gpt-4o-mini")
        last = tree.say(asked, "assistant", answer)
    return {
        "title": title, "create_time": created, "update_time": tree.time, "mapping": tree.mapping,
        "moderation_results": [], "current_node": last, "plugin_ids": None,
        "conversation_id": str(uuid.UUID(int=rng.getrandbits(128))), "conversation_template_id": None,
        "gizmo_id": None, "is_archived": False, "safe_urls": [], "default_model_slug": "gpt-4o",
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
    }


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def chatgpt_export(count: int, *, seed: int = 1, turns: int = 4) -> list[dict]:
    """count conversations; every third has a regenerated answer and every fifth an edited question."""
    rng = random.Random(seed)
    conversations = []
    for n in range(1, count + 1):
        pairs = [(f"{_sentence(rng, 12)} {marker(n) if t == 0 else ''}".strip(), _sentence(rng, 60))
                 for t in range(turns)]
        conversations.append(chatgpt_conversation(
            f"Conversation {n} about {rng.choice(WORDS)}", pairs, seed=seed * 100_000 + n,
            regenerated={1: [_sentence(rng, 30)]} if n % 3 == 0 else None,
            edited={2: (_sentence(rng, 10), _sentence(rng, 20))} if n % 5 == 0 and turns > 2 else None))
    return conversations


def claude_conversation(name: str, turns: list[tuple[str, str]], *, seed: int = 0,
                        attachments: list[dict] | None = None) -> dict:
    rng = random.Random(seed)
    moment = BASE_TIME + seed * 3600

    def at(seconds: float) -> str:
        from datetime import UTC, datetime

        return datetime.fromtimestamp(moment + seconds, tz=UTC).isoformat().replace("+00:00", "Z")

    messages = []
    for index, (question, answer) in enumerate(turns):
        for sender, text in (("human", question), ("assistant", answer)):
            messages.append({
                "uuid": str(uuid.UUID(int=rng.getrandbits(128))), "text": text,
                "content": [{"type": "text", "text": text, "start_timestamp": at(len(messages) * 30),
                             "stop_timestamp": at(len(messages) * 30 + 5), "citations": []}],
                "sender": sender, "created_at": at(len(messages) * 30), "updated_at": at(len(messages) * 30),
                "attachments": attachments if sender == "human" and index == 0 and attachments else [],
                "files": [],
            })
    return {"uuid": str(uuid.UUID(int=rng.getrandbits(128))), "name": name, "created_at": at(0),
            "updated_at": at(len(messages) * 30), "account": {"uuid": str(uuid.UUID(int=rng.getrandbits(128)))},
            "chat_messages": messages}


def claude_export(count: int, *, seed: int = 2, turns: int = 3) -> list[dict]:
    rng = random.Random(seed)
    return [claude_conversation(f"Claude chat {n}", [(f"{_sentence(rng, 10)} {marker(n) if t == 0 else ''}".strip(),
                                                      _sentence(rng, 40)) for t in range(turns)], seed=seed + n)
            for n in range(1, count + 1)]


def as_json(conversations) -> bytes:
    return json.dumps(conversations).encode("utf-8")


def as_zip(conversations, *, product: str = "chatgpt") -> bytes:
    """The export as the product ships it: a zip with conversations.json and its other files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", as_json(conversations))
        if product == "chatgpt":
            archive.writestr("user.json", json.dumps({"id": "user-1", "email": "someone@example.com"}))
            archive.writestr("chat.html", "<html><body>conversations</body></html>")
        else:
            archive.writestr("users.json", json.dumps([{"uuid": "u-1", "full_name": "Someone"}]))
            archive.writestr("projects.json", "[]")
    return buffer.getvalue()
