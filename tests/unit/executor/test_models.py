"""The scripted mock model (DESIGN §5) and the fallback chain."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from agentmesh.executor.providers.base import Message, ModelChunk, ModelError, ToolSpec, Usage
from agentmesh.executor.providers.factory import FallbackModel
from agentmesh.executor.providers.mock import MockModel


async def answer(model, text: str = "hi") -> tuple[str, list[ModelChunk]]:
    chunks = [chunk async for chunk in model.stream([Message("user", text)], ())]
    return "".join(c.text for c in chunks), chunks


async def test_the_ith_call_answers_item_i_and_the_last_repeats() -> None:
    model = MockModel(["one", {"content": "two", "tool_calls": [{"name": "t", "arguments": {"x": 1}}]}])
    assert (await answer(model))[0] == "one"
    text, chunks = await answer(model)
    assert text == "two"
    assert [(c.name, c.arguments) for c in chunks[-1].tool_calls] == [("t", {"x": 1})]
    assert chunks[-1].finish_reason == "tool_calls"
    assert (await answer(model))[0] == "two"


async def test_text_streams_in_chunks_and_usage_comes_last() -> None:
    model = MockModel(["word " * 40], chunk_chars=20)
    text, chunks = await answer(model)
    assert text == "word " * 40
    assert len([c for c in chunks if c.text]) > 5
    # The model has no price here: its tokens count, its cost is unknown (not 0).
    assert chunks[-1].usage == Usage(input_tokens=1, output_tokens=40, unpriced=frozenset({"mock"}))


async def test_no_script_echoes_and_errors_can_be_scripted() -> None:
    assert (await answer(MockModel([]), "echo me"))[0] == "echo me"
    with pytest.raises(ModelError) as raised:
        await answer(MockModel([{"error": "rate limited", "retryable": True}]))
    assert raised.value.retryable


class Scripted:
    system = "test"

    def __init__(self, name: str, error: ModelError | None = None, after_text: bool = False) -> None:
        self.name = name
        self.error = error
        self.after_text = after_text
        self.calls = 0

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        if self.after_text:
            yield ModelChunk(text="partial ")
        if self.error is not None:
            raise self.error
        yield ModelChunk(text=f"from {self.name}")


async def test_fallback_tries_the_next_model_on_a_retryable_error_only() -> None:
    primary = Scripted("primary", ModelError("429", retryable=True))
    secondary = Scripted("secondary")
    assert (await answer(FallbackModel([primary, secondary])))[0] == "from secondary"

    fatal = Scripted("primary", ModelError("400 bad request"))
    unused = Scripted("secondary")
    with pytest.raises(ModelError, match="400"):
        await answer(FallbackModel([fatal, unused]))
    assert unused.calls == 0

    # Once text has streamed, a failure is final: the fallback would repeat it.
    streamed = Scripted("primary", ModelError("reset", retryable=True), after_text=True)
    with pytest.raises(ModelError, match="reset"):
        await answer(FallbackModel([streamed, Scripted("secondary")]))
