"""One model step of the LLM loop: the model's reply streamed out as text deltas (```delegate /
```tool_call blocks taken out, the text chunked), with its native tool calls, its blocks and its
usage, inside the step's span and metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.text import FencedBlock, FencedBlockFilter, TextChunker
from agentmesh.executor.context.scope import RunFailure, RunScope
from agentmesh.executor.errors import MODEL_FAILED
from agentmesh.executor.providers.base import ChatModel, Message, ModelError, ToolCallRequest, ToolSpec, Usage
from agentmesh.runtime import metrics, telemetry


class Chunking(Protocol):
    """How streamed text is grouped into deltas (the loop's settings)."""

    text_chunk_chars: int
    text_flush_seconds: float


@dataclass
class ModelReply:
    raw: str
    visible: str
    native_calls: Sequence[ToolCallRequest]
    blocks: Sequence[FencedBlock]
    usage: Usage = field(default_factory=Usage)


async def call_model(
    scope: RunScope,
    model: ChatModel,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    step: int,
    *,
    chunking: Chunking,
) -> ModelReply:
    """One model step: the model's reply streamed as text deltas (fenced blocks taken out,
    chunked), with its native tool calls, its blocks and its usage. A model that fails fails the
    run (RunFailure, UNAVAILABLE when it may be retried)."""
    fenced = FencedBlockFilter()
    chunker = TextChunker(chunking.text_chunk_chars, chunking.text_flush_seconds)
    raw: list[str] = []
    visible: list[str] = []
    native: list[ToolCallRequest] = []
    usage = Usage()
    response_model = finish_reason = ""
    answered_by = model.name  # a fallback model may answer instead

    async def emit(pieces: list[str]) -> None:
        for piece in pieces:
            if piece:
                visible.append(piece)
                await scope.sink.emit(scope.origin.event(text_delta=run_pb2.TextDelta(text=piece)))

    with telemetry.model_span(system=model.system, model=model.name, step=step) as span:
        started = time.monotonic()
        error_type = ""
        try:
            async for chunk in model.stream(messages, tools):
                if chunk.text:
                    raw.append(chunk.text)
                    await emit(chunker.add(fenced.feed(chunk.text)))
                native.extend(chunk.tool_calls)
                if chunk.usage is not None:
                    usage = usage + chunk.usage
                response_model = chunk.response_model or response_model
                answered_by = chunk.model_name or answered_by
                finish_reason = chunk.finish_reason or finish_reason
        except ModelError as error:
            error_type = type(error.__cause__ or error).__name__
            raise RunFailure(
                "UNAVAILABLE" if error.retryable else "FAILED_PRECONDITION",
                f"model {model.name} failed: {error}",
                reason=MODEL_FAILED,
            ) from error
        except asyncio.CancelledError:
            error_type = "cancelled"
            raise
        except Exception as error:
            error_type = type(error).__name__
            raise
        finally:
            metrics.record_model_call(
                system=model.system,
                model=model.name,
                seconds=time.monotonic() - started,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                error_type=error_type,
            )
        scope.meter.add(answered_by, usage)
        metrics.record_model_spend(
            system=model.system,
            model=answered_by,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cost=usage.cost if usage.cost_known else None,
        )
        await emit([*chunker.add(fenced.finish()), chunker.flush()])
        telemetry.record_model_usage(
            span,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            response_model=response_model,
            finish_reason=finish_reason,
        )
    text = "".join(visible)
    # Only where blocks were cut out is there whitespace that the model did not mean.
    return ModelReply("".join(raw), text.strip() if fenced.blocks else text, native, fenced.blocks, usage)
