"""The scripted model (DESIGN §5): answers from the agent's `mock_responses`, for tests and demos.

The i-th call of a run returns item i, the last item repeating once the list is spent. An item is
a string, or `{"content": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}`, optionally
with `"delay_seconds"` (a pause before each chunk, to simulate a slow model), `"usage"`
(`{"input_tokens": n, "output_tokens": m, "cached_input_tokens": c}`, else words are counted;
priced as the operator prices the agent's model name) or `"error"` (the call fails;
`"retryable": true` makes it a rate-limit-like failure), or `"echo_prompt": true` (the answer is
the conversation it was given after the agent's system prompt, one `role: content` line per
message: how a test sees the context and prompt a run built). With no responses the model echoes
the last user message.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agentmesh.executor.providers.base import (
    Message,
    ModelChunk,
    ModelError,
    ToolCallRequest,
    ToolSpec,
)
from agentmesh.executor.providers.pricing import Price, priced_usage


def split_chunks(text: str, size: int) -> list[str]:
    """Splits text into chunks of about `size` characters, on word boundaries where possible."""
    chunks: list[str] = []
    while len(text) > size:
        cut = text.rfind(" ", 0, size) + 1 or size
        chunks.append(text[:cut])
        text = text[cut:]
    if text:
        chunks.append(text)
    return chunks


class MockModel:
    """A `ChatModel` that plays a script. One instance serves one run (it counts its calls)."""

    system = "mock"

    def __init__(
        self,
        responses: Sequence[Any],
        *,
        name: str = "mock",
        chunk_chars: int = 64,
        answered: int = 0,
        price: Price | None = None,
    ) -> None:
        self._responses = list(responses)
        # A run resumed from the log (executor resumption.py) had `answered` steps answered
        # already: the script goes on after them, as a real model is asked only what is left.
        self._calls = answered
        self.name = name
        self._chunk_chars = chunk_chars
        self._price = price

    def _next_item(self, messages: Sequence[Message]) -> dict[str, Any]:
        if not self._responses:
            last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
            return {"content": last_user}
        item = self._responses[min(self._calls, len(self._responses) - 1)]
        self._calls += 1
        if isinstance(item, str):
            return {"content": item}
        if isinstance(item, dict):
            return item
        raise ModelError(f"mock response {self._calls} is neither a string nor an object")

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[ModelChunk]:
        item = self._next_item(messages)
        if item.get("error"):
            raise ModelError(str(item["error"]), retryable=bool(item.get("retryable", False)))
        content = str(item.get("content") or "")
        if item.get("echo_prompt"):
            content = "\n".join(f"{m.role}: {m.content}" for m in messages[1:])
        delay = float(item.get("delay_seconds") or 0)
        for chunk in split_chunks(content, self._chunk_chars):
            if delay:
                await asyncio.sleep(delay)
            yield ModelChunk(text=chunk)
        calls = [
            ToolCallRequest(
                id=str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
                name=str(call["name"]),
                arguments=dict(call.get("arguments") or {}),
            )
            for call in item.get("tool_calls") or []
        ]
        scripted = item.get("usage") or {}
        usage = priced_usage(
            self.name,
            self._price,
            input_tokens=int(scripted.get("input_tokens", sum(len(m.content.split()) for m in messages))),
            output_tokens=int(scripted.get("output_tokens", len(content.split()))),
            cached_input_tokens=int(scripted.get("cached_input_tokens", 0)),
        )
        if delay and not content:
            await asyncio.sleep(delay)
        yield ModelChunk(
            tool_calls=calls,
            usage=usage,
            response_model=self.name,
            finish_reason="tool_calls" if calls else "stop",
            model_name=self.name,
        )
