"""The built-in function tools: `exit_loop` (escalate out of the enclosing loop agent),
`get_current_time`, and `ask_user` (ask the person the run works for, and wait for the answer)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentmesh.executor.providers.base import ToolSpec
from agentmesh.executor.tools.base import Tool, ToolError, ToolOutput

EXIT_LOOP = "exit_loop"
GET_CURRENT_TIME = "get_current_time"
ASK_USER = "ask_user"


class ExitLoop:
    """Ends the innermost enclosing loop agent once the calling agent's run has ended (ADK's
    `exit_loop`: it sets escalate)."""

    idempotent = True  # it only says so: calling it again changes nothing

    spec = ToolSpec(
        name=EXIT_LOOP,
        description=(
            "Call this when the task is done and the enclosing loop should stop iterating. "
            "Optionally give the reason, and whether you will answer once more after it."
        ),
        parameters={
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why the loop can stop."},
                "summarize": {
                    "type": "boolean",
                    "description": "Answer once more (summing up) before stopping; default false.",
                },
            },
            "additionalProperties": False,
        },
    )

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        reason = str(arguments.get("reason") or "done")
        return ToolOutput(
            f"Exiting the loop: {reason}", escalate=True, summarize=arguments.get("summarize") is True
        )


class GetCurrentTime:
    """The current date and time, in UTC or an IANA time zone."""

    idempotent = True  # it reads a clock, and changes nothing

    spec = ToolSpec(
        name=GET_CURRENT_TIME,
        description="Returns the current date and time (ISO 8601) in UTC or in the given IANA time zone.",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "description": "IANA time zone such as 'Europe/Paris'; UTC when omitted.",
                }
            },
            "additionalProperties": False,
        },
    )

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        name = arguments.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(f"unknown time zone {name!r}; use an IANA name such as 'Europe/Paris'") from None
        return ToolOutput(self._clock().astimezone(zone).isoformat(timespec="seconds"))


class AskUser:
    """Asks the person the run works for a question. The LLM loop answers its calls itself: the
    run records the question as a request for input and suspends, and the person's answer is the
    call's result when it resumes (loops/asking.py). Never called directly."""

    spec = ToolSpec(
        name=ASK_USER,
        description=(
            "Ask the user a question and wait for the answer, when you need information or a "
            "decision only they can give. The answer comes back as this tool's result."
        ),
        parameters={
            "type": "object",
            "properties": {"question": {"type": "string", "minLength": 1, "description": "The question."}},
            "required": ["question"],
            "additionalProperties": False,
        },
    )

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        raise ToolError("ask_user is answered by a person, not run")


def builtin_tools() -> dict[str, Callable[[], Tool]]:
    """Factories of the built-in tools, by name."""
    return {EXIT_LOOP: ExitLoop, GET_CURRENT_TIME: GetCurrentTime, ASK_USER: AskUser}
