"""The tool interface: what a tool offers the model, and what one call of it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentmesh.executor.providers.base import ToolSpec


@dataclass(frozen=True)
class ToolOutput:
    """What a call returned: text for the model (JSON text for structured results), whether it is
    an error the model should see, and whether the call escalates out of the enclosing loop."""

    text: str
    is_error: bool = False
    escalate: bool = False
    # With `escalate`: the model answers once more (summing up the step's results) before the run
    # ends, rather than the run ending on the escalating step (ADK's skip_summarization=False).
    summarize: bool = False
    # For metrics: "timeout" or "refused" (unknown tool, invalid arguments) when the call said
    # why it failed; otherwise `is_error` alone decides between "ok" and "error".
    outcome: str = ""

    @property
    def metric_outcome(self) -> Literal["ok", "error", "timeout", "refused"]:
        if self.outcome == "timeout":
            return "timeout"
        if self.outcome == "refused":
            return "refused"
        return "error" if self.is_error else "ok"


class ToolError(Exception):
    """A tool failed in a way the model can act on; the message is fed back to it."""


class Tool(Protocol):
    """A callable tool. Arguments arrive already validated against `spec.parameters`.

    A tool may declare itself `idempotent` (an attribute, False when absent): calling it twice
    with the same arguments does no more than calling it once. A run resumed on another executor
    runs such a call again when its result was never recorded; any other tool's call is then in
    doubt and is not run again (docs/durability.md, `is_idempotent`)."""

    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any]) -> ToolOutput: ...


def is_idempotent(tool: object) -> bool:
    """Whether a tool declared itself idempotent (see `Tool`); undeclared means no."""
    return getattr(tool, "idempotent", False) is True
