"""The tool interface: what a tool offers the model, and what one call of it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentmesh.executor.providers.base import ToolSpec


@dataclass(frozen=True)
class ToolQuestion:
    """A call its tool cannot finish without a person's answer (an MCP server's elicitation): the
    question to ask, and what the tool needs to go on with the call once answered — JSON that is
    recorded with the request, so whichever executor resumes the run carries it back."""

    question: str
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolAnswer:
    """A person's response to a `ToolQuestion`, carried back into the call: `accept` with the
    answer's text, `decline` (denied) or `cancel` (nobody answered in time)."""

    state: dict[str, Any]
    action: Literal["accept", "decline", "cancel"]
    text: str = ""


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
    # The call waits for a person instead of having a result: the run asks and suspends, and the
    # call goes on with the answer (`Tool.call(..., answer=...)`) when the run resumes.
    question: ToolQuestion | None = None

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
    doubt and is not run again (docs/durability.md, `is_idempotent`).

    A tool whose calls may ask a person (an output with a `question`) also takes `answer=`: the
    same call again, carrying the person's `ToolAnswer`."""

    @property
    def spec(self) -> ToolSpec: ...

    async def call(self, arguments: dict[str, Any]) -> ToolOutput: ...


def is_idempotent(tool: object) -> bool:
    """Whether a tool declared itself idempotent (see `Tool`); undeclared means no."""
    return getattr(tool, "idempotent", False) is True
