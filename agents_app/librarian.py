"""The Librarian (`builtin:librarian`): an offline agent that answers from the user's own hub.

It is not a language model. It reads the question, calls one Hub tool (search the user's
messages or the text of their files, list their chats, read or write shared memory) through the
same exactly-once tool path as any agent, and streams an answer built from the result, with links
to the chats and files it cites.

Its answer follows from the question and the tool's result, so a continuation (after a recovery,
or when the user asks it to continue) streams only what the reply still lacks; see rest_of_answer.
"""

import asyncio
import json
import re
from datetime import UTC, datetime

from pydantic_ai.messages import ModelResponse, TextPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from agents_app.scripted import _turn_start
from chats.search import COMMON_WORDS
from chats.services import plain_text

TOOLS = ["search_messages", "search_files", "list_chats", "read_memory", "remember"]
INTRO = (
    "I'm the Librarian, Hub's built-in agent. I'm not a language model: I look things up in your own "
    "hub. Ask me \"what did I say about …?\", \"what does the lease say about …?\" (your files), \"list my "
    "chats\", \"what do you remember?\", or tell me \"remember that …\" (or \"note that …\")."
)
# Between a partial reply and an answer that no longer continues it (the user asked to continue an
# old reply, and the tool, run again, found other things).
CHANGED_NOTE = "\n\n*Your hub has changed since I began this answer; here it is as it stands now:*\n\n"
QUESTION_WORDS = {
    "what", "did", "i", "say", "said", "about", "where", "when", "who", "how", "do", "does", "is", "are",
    "the", "a", "an", "my", "me", "find", "search", "for", "messages", "message", "mention", "mentioned",
    "talk", "talked", "tell", "of", "on", "in", "any", "anything", "please", "can", "you",
}
# A question about a file's text: "what does the lease say about pets?", "search my files for …".
ABOUT_FILES = re.compile(r"\bwhat (?:does|do) (?:the|my|this|that|these|those) .+? (?:say|says|state|mention)\b"
                         r"|\b(?:files?|documents?|pdfs?|attachments?|attached|uploads?|uploaded)\b")
FILE_WORDS = {"file", "files", "document", "documents", "pdf", "pdfs", "attachment", "attachments", "attached",
              "upload", "uploads", "uploaded", "say", "says", "state", "states", "this", "that", "these", "those"}


# Something to keep, not to look for: "remember that …", and the ways people say it with a note
# ("note that …", "make a note: …", "take a note of …", "jot down …").
REMEMBER = re.compile(
    r"(?is)^\s*(?:please\s+)?(?:remember(?:\s+that)?|note(?:\s+that)?|(?:make|take)\s+a\s+note(?:\s+(?:of|that))?"
    r"|jot\s+down(?:\s+that)?|keep\s+in\s+mind(?:\s+that)?)[\s:,]+(.+)$"
)


def plan(prompt: str) -> tuple[str | None, dict]:
    """Which tool answers this prompt, with its arguments (None: just introduce myself)."""
    text = prompt.strip()
    if match := REMEMBER.match(text):
        return "remember", {"text": match.group(1).strip()}
    lowered = text.lower()
    if re.fullmatch(r"\W*(hello|hi|hey|help|who are you|what can you do|what are you)\b.{0,30}", lowered):
        return None, {}
    if re.search(r"\b(list|show)\b.*\bchats?\b|\bmy chats\b|\bwhich chats\b|\bwhat chats\b", lowered):
        return "list_chats", {}
    if re.search(r"\bwhat do you (remember|know)\b|\b(memory|recall)\b", lowered):
        return "read_memory", {}
    if ABOUT_FILES.search(lowered):
        # The whole question's words: a passage starts with its file's name ("[lease.pdf, page 3]").
        words = [w for w in re.findall(r"\w+", text) if w.lower() not in QUESTION_WORDS | FILE_WORDS]
        return ("search_files", {"query": " ".join(words)}) if words else (None, {})
    topic = text.split("about", 1)[1] if "about" in lowered else text
    # Every word must match (chats.search), so the question's small words are left out.
    words = [w for w in re.findall(r"\w+", topic) if w.lower() not in QUESTION_WORDS | COMMON_WORDS]
    if not words:
        return None, {}
    return "search_messages", {"query": " ".join(words)}


def _chat_link(title: str, chat_id: str, message_id: int | None = None) -> str:
    """A Markdown link to a chat, or to one of its messages (the page opens its thread at it)."""
    safe = title.replace("[", "(").replace("]", ")") or "Untitled chat"
    return f"[{safe}](/chats/{chat_id}/{f'#message-{message_id}' if message_id else ''})"


def _temporary_note(chat: dict) -> str:
    """" (temporary · expires in 23 h)" for a temporary chat, else nothing."""
    if not chat.get("expires_at"):
        return ""
    left = datetime.fromisoformat(chat["expires_at"]) - datetime.now(UTC)
    hours = max(0, round(left.total_seconds() / 3600))
    return f" (temporary · expires in {hours} h)" if hours else " (temporary · expires within the hour)"


def answer(tool: str | None, args: dict, result) -> str:
    if tool is None:
        return INTRO
    if tool == "remember":
        return result if result.startswith("Not remembered") else f"I'll remember that: {args['text']}"
    if tool == "read_memory":
        return f"Here is what I remember:\n\n{result}" if result else "I don't remember anything yet."
    if tool == "list_chats":
        if not result:
            return "You have no chats yet."
        lines = [f"- {_chat_link(c['title'], c['chat_id'])}" + _temporary_note(c)
                 + (f" — {plain_text(c['preview'])}" if c["preview"] else "") for c in result]
        return "Your most recent chats:\n\n" + "\n".join(lines)
    if tool == "search_files":
        return _file_answer(args["query"], result)
    if not result:
        return (f"I found nothing about \"{args['query']}\" in your chats. "
                "(I search your own hub; I'm not a language model.)")
    lines = [f"- {_chat_link(h['chat_title'], h['chat_id'], h.get('message_id'))}: {_bold_terms(h['snippet'])}"
             for h in result]
    return f"Here is what you said about \"{args['query']}\":\n\n" + "\n".join(lines)


def _file_answer(query: str, passages: list) -> str:
    if not passages:
        return (f"I found nothing about \"{query}\" in your files. (I search the text of the files in your "
                "chats; a scanned page or an image has none.)")
    lines = []
    for passage in passages:
        name = passage["name"].replace("[", "(").replace("]", ")")
        where = f", page {passage['page']}" if passage.get("page") else ""
        chat = _chat_link(passage["chat_title"], passage["chat_id"])
        lines.append(f"- [{name}]({passage['url']}){where}, in {chat}: {_bold_terms(passage['snippet'])}")
    return f"Here is what your files say about \"{query}\":\n\n" + "\n".join(lines)


def _bold_terms(snippet: str) -> str:
    return snippet.replace("[[", "**").replace("]]", "**")


def _tool_result(messages, start: int):
    for message in messages[start:]:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                return True, part.content
    return False, None


def _written(messages, start: int) -> str:
    """The reply text this turn already holds: a continuation's partial text."""
    return "".join(part.content for message in messages[start:] if isinstance(message, ModelResponse)
                   for part in message.parts if isinstance(part, TextPart))


def rest_of_answer(answer_text: str, written: str) -> str:
    """What to stream after the text already written: the rest of the same answer, or nothing when
    it is all there. When the written text is not the start of this answer (the tool ran again and
    found other things), the user gets a note and the whole current answer: the partial answer
    stays as it was shown, and no sentence of a stale list is finished with other data."""
    if answer_text.startswith(written):
        return answer_text[len(written):]
    if written.startswith(answer_text):
        return ""
    return CHANGED_NOTE + answer_text


def librarian_model(*, chunk: int = 12, delay: float = 0.01) -> FunctionModel:
    async def stream(messages, info: AgentInfo):
        start, prompt = _turn_start(messages)
        tool, args = plan(prompt)
        done, result = _tool_result(messages, start)
        if tool is not None and not done:
            yield {0: DeltaToolCall(name=tool, json_args=json.dumps(args), tool_call_id=f"librarian-{tool}-0")}
            return
        text = rest_of_answer(answer(tool, args, result), _written(messages, start))
        for i in range(0, len(text), chunk):
            if delay:
                await asyncio.sleep(delay)
            yield text[i:i + chunk]

    return FunctionModel(stream_function=stream, model_name="librarian")
