"""A deterministic model for tests and benchmarks (pydantic-ai FunctionModel, no network).

Model string `test:scripted`; the agent's settings["script"] says what it does:

    {"reply": "Hello {prompt}", "chunk": 4, "delay": 0.02, "reasoning": "",
     "tools": [{"name": "record_effect", "args": {"key": "k"}}], "fail": "", "stall_after": null}

It first calls each tool in order (streaming the arguments in pieces), then streams its reasoning
(if any) and the reply. In the reply, {prompt} is the user's message and {instructions} what the
agent was told (its system prompt, the shared memory and the thread's notes).
Given the conversation so far it always produces the same next step, so a continuation after a
recovery streams exactly the remainder of the uninterrupted reply.
"""

import asyncio
import json

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ThinkingPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel

CONTINUE_PROMPT = (
    "Your previous reply was interrupted after the text above. Continue it from exactly where it "
    "stopped, without repeating anything."
)


class ScriptFailure(RuntimeError):
    pass


def _turn_start(messages) -> tuple[int, str]:
    """Index and text of the last real user prompt (a continue prompt is not one)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest):
            # Last part first: pydantic-ai merges the prompt into a history that ends with an
            # unanswered request (a delegated question after the user's message), as one request.
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and part.content != CONTINUE_PROMPT:
                    return index, prompt_words(part)
    return 0, ""


def prompt_words(part: UserPromptPart) -> str:
    """A prompt's own words: its text, or the first text of a prompt that carries files too."""
    if isinstance(part.content, str):
        return part.content
    return next((item for item in part.content if isinstance(item, str)), "")


def _progress(messages, start: int) -> tuple[int, str, bool]:
    tool_returns, text, thought = 0, "", False
    for message in messages[start:]:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                tool_returns += 1
            elif isinstance(message, ModelResponse) and isinstance(part, TextPart):
                text += part.content
            elif isinstance(part, ThinkingPart):
                thought = True
    return tool_returns, text, thought


def full_reply(script: dict, prompt: str, instructions: str = "") -> str:
    reply = script.get("reply", "You said: {prompt}")
    return reply.replace("{prompt}", prompt).replace("{instructions}", instructions or "")


class Pace:
    """Paces pieces by the clock, one every delay seconds, as a model server sends them.

    Sleeping a fixed delay after each piece would let a loaded event loop slow the stream down (a
    late wake-up delays every later piece), so a benchmark would ask less of a busy machine than
    it claims. Here a late piece is followed at once by the ones that fell due meanwhile.
    """

    def __init__(self, delay: float):
        self.delay = delay
        self.due = None

    async def wait(self) -> None:
        if not self.delay:
            return
        now = asyncio.get_running_loop().time()
        self.due = (now if self.due is None else self.due) + self.delay
        await asyncio.sleep(max(0.0, self.due - now))


def scripted_model(script: dict) -> FunctionModel:
    chunk = max(1, int(script.get("chunk", 4)))
    delay = float(script.get("delay", 0.0))
    tools = script.get("tools", [])

    async def stream(messages, info: AgentInfo):
        start, prompt = _turn_start(messages)
        pace = Pace(delay)
        done_tools, produced, thought = _progress(messages, start)
        if script.get("fail"):
            raise ScriptFailure(script["fail"])
        if done_tools < len(tools):
            step = tools[done_tools]
            args = json.dumps(step.get("args", {}))
            call_id = f"{step['name']}-{done_tools}"
            pieces = [args[i:i + chunk] for i in range(0, len(args), chunk)] or [""]
            yield {0: DeltaToolCall(name=step["name"], json_args=pieces[0], tool_call_id=call_id)}
            for piece in pieces[1:]:
                await pace.wait()
                yield {0: DeltaToolCall(json_args=piece)}
            return
        reasoning = script.get("reasoning", "")
        if reasoning and not produced and not thought:
            for i in range(0, len(reasoning), chunk):
                await pace.wait()
                yield {0: DeltaThinkingPart(content=reasoning[i:i + chunk])}
        reply = full_reply(script, prompt, info.instructions or "")
        remainder = reply[len(produced):] if reply.startswith(produced) else reply
        stall_after = script.get("stall_after")
        sent = len(produced)
        if not remainder:
            yield ""  # the reply was whole already: an empty answer, as a model server sends one
        for i in range(0, len(remainder), chunk):
            if stall_after is not None and sent >= stall_after:
                await asyncio.sleep(3600)
            await pace.wait()
            piece = remainder[i:i + chunk]
            sent += len(piece)
            yield piece

    return FunctionModel(stream_function=stream, model_name="scripted")
