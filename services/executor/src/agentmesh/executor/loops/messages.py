"""The messages a model step adds to its context: the assistant turn that asked for calls
(`assistant_turn`, rebuilt from the log for a resumed run) and what those calls answered
(`result_messages`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agentmesh.executor.agents.runtime import DELEGATE_TOOL, fenced
from agentmesh.executor.agents.text import DELEGATE, TOOL_CALL
from agentmesh.executor.durability.run_log import DELEGATION, PlannedCall
from agentmesh.executor.providers.base import Message, ToolCallRequest
from agentmesh.executor.tools.base import ToolOutput


def assistant_turn(calls: Sequence[PlannedCall]) -> Message:
    """The model's turn that asked for `calls`, rebuilt from their intent events (a resumed run):
    native calls as tool calls, fenced ones as the blocks it wrote (its other text of that step
    was streamed, not recorded)."""
    native = [
        ToolCallRequest(
            call.id,
            DELEGATE_TOOL if call.kind == DELEGATION else call.name,
            {"agent": call.name, "task": call.task} if call.kind == DELEGATION else call.arguments,
        )
        for call in calls
        if call.native
    ]
    blocks = [
        fenced(DELEGATE, json.dumps({"agent": call.name, "task": call.task}))
        if call.kind == DELEGATION
        else fenced(TOOL_CALL, json.dumps({"name": call.name, "arguments": call.arguments}))
        for call in calls
        if not call.native
    ]
    return Message("assistant", "\n".join(blocks), tool_calls=native)


def cut(text: str, max_chars: int) -> str:
    """`text` as a prompt shows it: at most `max_chars` characters (0: all), saying how much was
    left out — the log keeps the whole of it."""
    if not max_chars or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[… {len(text) - max_chars} more characters cut from the prompt]"


def result_messages(
    calls: Sequence[PlannedCall], outputs: Sequence[ToolOutput], *, max_chars: int = 0
) -> list[Message]:
    """What a step's calls answered, as the model reads it next: a tool message per native call,
    one user message listing the fenced blocks' results; each result cut to `max_chars`."""
    messages = [
        Message("tool", cut(output.text, max_chars), tool_call_id=call.id, name=call.name)
        for call, output in zip(calls, outputs, strict=True)
        if call.native
    ]
    fenced = [
        f"[{'delegate' if call.kind == DELEGATION else 'tool_call'} {call.name}]"
        f"{' error' if output.is_error else ''}: {cut(output.text, max_chars)}"
        for call, output in zip(calls, outputs, strict=True)
        if not call.native
    ]
    if fenced:
        messages.append(Message("user", "Results of your fenced blocks:\n" + "\n".join(fenced)))
    return messages
