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
    """Tokens and cost of model calls. The cost is known only while every call counted had a
    priced model: `unpriced` names those that had none (their tokens count, their cost cannot),
    so an unknown cost is never mistaken for a free one."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached_input_tokens: int = 0
    unpriced: frozenset[str] = frozenset()

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost + other.cost,
            self.cached_input_tokens + other.cached_input_tokens,
            self.unpriced | other.unpriced,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_known(self) -> bool:
        return not self.unpriced


@dataclass(frozen=True)
class ModelChunk:
    """A piece of a streamed answer: text, and on the last chunk the tool calls, usage, the model
    that answered (a fallback may have: `model_name` as agents name it, `response_model` as its
    provider does) and why it stopped."""

    text: str = ""
    tool_calls: Sequence[ToolCallRequest] = field(default_factory=tuple)
    usage: Usage | None = None
    response_model: str = ""
    finish_reason: str = ""
    model_name: str = ""


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
