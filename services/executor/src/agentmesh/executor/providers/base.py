"""The model interface every provider implements: a streaming chat call with tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call the model asked for. `error` is set when the model's arguments could not be
    read (not JSON, not an object): the call is then answered with that error."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str = ""


@dataclass(frozen=True)
class Message:
    """One message of a model's context."""

    role: Role
    content: str
    tool_calls: Sequence[ToolCallRequest] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to the model: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost + other.cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelChunk:
    """A piece of a streamed answer: text, and on the last chunk the tool calls, usage, the model
    that answered (a fallback may have) and why it stopped."""

    text: str = ""
    tool_calls: Sequence[ToolCallRequest] = field(default_factory=tuple)
    usage: Usage | None = None
    response_model: str = ""
    finish_reason: str = ""


class ModelError(Exception):
    """A model call failed. `retryable` errors (rate limits, 5xx, timeouts, connection errors)
    are retried and then fall back to the next model; others end the run."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ChatModel(Protocol):
    """A model that answers a context, streaming."""

    @property
    def system(self) -> str:
        """The provider name for `gen_ai.system` (e.g. "openai", "mock")."""
        ...

    @property
    def name(self) -> str:
        """The model name for `gen_ai.request.model`."""
        ...

    def stream(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AsyncIterator[ModelChunk]: ...
