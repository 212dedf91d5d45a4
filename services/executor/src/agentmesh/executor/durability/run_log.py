"""A run's state read back from its recorded events, so the executor that takes it over goes on
from where the log stops (docs/durability.md, "Resumption from the log").

Every step's calls are rebuilt from their intent events (`tool_call`, `delegation_request`, which
record the model's call id, step and place before anything runs), each with its recorded result
(`tool_result`, `delegation_response`) or none: `read_run_log`. The LLM loop plans its calls as
`PlannedCall`s and records each one's `intent`, the same shape this module reads back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.struct_pb2 import Value

from agentmesh.executor.durability.child_log import is_final
from agentmesh.executor.durability.recorder import EventType, resumes
from agentmesh.executor.providers.base import Usage
from agentmesh.executor.tools.base import ToolOutput, ToolQuestion
from agentmesh.memory.v1 import resources_pb2

Event = resources_pb2.Event

_INPUT_TYPES = (EventType.EVENT_TYPE_USER_MESSAGE, EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED)

TOOL, DELEGATION, INVALID = "tool", "delegation", "invalid"

# A tool call of a resumed run whose outcome is unknown is answered with this (loops/llm.py).
IN_DOUBT = (
    "the outcome of this call is unknown: the executor running it stopped before its result was "
    "recorded, and the tool is not declared idempotent, so it was not run again"
)


@dataclass
class PlannedCall:
    """One thing the model asked for in a step: a tool call, a delegation, or a malformed block."""

    kind: str
    id: str
    name: str  # the tool, or the target agent
    arguments: dict[str, Any] = field(default_factory=dict)
    task: str = ""
    error: str = ""
    native: bool = True  # function calling (answered by a tool message) or a fenced block
    step: int = 0  # the model step that asked for it
    index: int = 0  # its place among the step's calls
    # What the model step that asked for it used: on the step's first call only, so that a run
    # resumed from the log counts a logged step's usage once (resumption.py).
    usage: Usage | None = None
    # Its tool's permission for this agent (tools/permissions.py): "allow", "ask" or "deny".
    permission: str = "allow"
    # A delegation whose remote A2A task stopped in input-required: the remote's question, which
    # the run asks its caller (loops/asking.py), and the request it asked before on this task
    # (answered; "" for the first), from which the next request's id derives.
    remote_question: str = ""
    asked_after: str = ""
    # A tool call its tool cannot finish without a person's answer (an MCP server's elicitation):
    # asked as a question, then sent again carrying the answer (tools/mcp_questions.py).
    tool_question: ToolQuestion | None = None

    def intent(self) -> dict[str, Any]:
        """What its intent event (`tool_call`, `delegation_request`) records of it besides the
        call itself, so a run resumed from the log rebuilds the step (resumption.py)."""
        intent: dict[str, Any] = {
            "call_id": self.id,
            "step": self.step,
            "index": self.index,
            "native": self.native,
        }
        if self.usage is not None:
            intent["usage"] = {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost": self.usage.cost,
            }
        return intent


@dataclass
class LoggedCall:
    """A call of a logged step: the call, its intent event, and its recorded output (None: the
    log stops before it had one); for a call that asked a person (loops/asking.py), its
    `input_requested` event and, once the resumed run recorded it, its `input_received`."""

    call: PlannedCall
    event: Event
    output: ToolOutput | None = None
    asked: Event | None = None
    received: Event | None = None


@dataclass
class LoggedStep:
    number: int
    calls: list[LoggedCall] = field(default_factory=list)


@dataclass
class RunLog:
    """What a run's events say about it (see the module's docstring)."""

    input: Event | None = None
    steps: list[LoggedStep] = field(default_factory=list)
    resumes: int = 0  # times it was resumed before
    ended: bool = False
    # A workflow's sub-agent runs in the log at takeover, by sub_agent_id (workflow.py).
    sub_agent_runs: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # why it cannot be resumed ("" when it can)
    # Of `resumes`, those after its executor stopped (not after a suspension): what the resume
    # limit counts.
    restarts: int = 0
    # A suspended run's requests for input with their responses, by id, as the registry handed
    # the run over (OrphanedRun.input_requests; the resumer sets them).
    responses: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> int:
        """Model steps answered before (a step that asked for nothing loggable is counted too)."""
        return max((step.number for step in self.steps), default=0)


def read_run_log(events: list[Event]) -> RunLog:
    """The run's state from its events (any order)."""
    log = RunLog()
    steps: dict[int, LoggedStep] = {}
    by_event: dict[str, LoggedCall] = {}
    by_delegation: dict[str, LoggedCall] = {}
    by_request: dict[str, LoggedCall] = {}
    for event in sorted(events, key=lambda e: e.seq):
        meta = event.metadata.fields
        kind = event.event_type
        if kind in _INPUT_TYPES and log.input is None:
            log.input = event
        elif is_final(event):
            log.ended = True
        elif kind in (EventType.EVENT_TYPE_TOOL_CALL, EventType.EVENT_TYPE_DELEGATION_REQUEST):
            if "step" not in meta:
                log.problem = "its intent events were recorded without their step"
                continue
            logged = LoggedCall(_planned(event), event)
            steps.setdefault(logged.call.step, LoggedStep(logged.call.step)).calls.append(logged)
            by_event[event.id] = logged
            if kind == EventType.EVENT_TYPE_DELEGATION_REQUEST:
                by_delegation[event.delegation_id] = logged
        elif kind == EventType.EVENT_TYPE_TOOL_RESULT and event.parent_event_id in by_event:
            is_error = bool(meta["is_error"].bool_value) if "is_error" in meta else False
            by_event[event.parent_event_id].output = ToolOutput(event.content, is_error=is_error)
        elif kind == EventType.EVENT_TYPE_INPUT_REQUESTED and event.parent_event_id in by_event:
            # A later request of the same call (a remote task that asked again) is the open one.
            by_event[event.parent_event_id].asked = event
            by_event[event.parent_event_id].received = None
            by_request[meta["request_id"].string_value if "request_id" in meta else ""] = by_event[
                event.parent_event_id
            ]
        elif kind == EventType.EVENT_TYPE_INPUT_RECEIVED and "request_id" in meta:
            asking = by_request.get(meta["request_id"].string_value)
            if asking is not None:
                asking.received = event
        elif kind == EventType.EVENT_TYPE_DELEGATION_RESPONSE and event.delegation_id in by_delegation:
            response = _json(event.content)
            by_delegation[event.delegation_id].output = ToolOutput(
                str(response.get("content", "")), is_error=response.get("outcome") != "completed"
            )
    for step in steps.values():
        step.calls.sort(key=lambda logged: logged.call.index)
    log.steps = [steps[number] for number in sorted(steps)]
    log.resumes = resumes(events)
    log.restarts = resumes(events, restarts_only=True)
    if log.input is None:
        log.problem = log.problem or "its input is not in the log"
    return log


def _planned(event: Event) -> PlannedCall:
    meta = event.metadata.fields
    content = _json(event.content)
    number = {name: int(meta[name].number_value) for name in ("step", "index") if name in meta}
    native = meta["native"].bool_value if "native" in meta else True
    usage = _usage(meta["usage"].struct_value.fields) if "usage" in meta else None
    call_id = meta["call_id"].string_value if "call_id" in meta else event.id
    if event.event_type == EventType.EVENT_TYPE_DELEGATION_REQUEST:
        target, task = str(content.get("agent", "")), str(content.get("task", ""))
        return PlannedCall(
            DELEGATION,
            call_id,
            target,
            {"agent": target, "task": task},
            task=task,
            native=native,
            usage=usage,
            **number,
        )
    arguments = content.get("arguments")
    return PlannedCall(
        TOOL,
        call_id,
        str(content.get("name", "")),
        arguments if isinstance(arguments, dict) else {},
        native=native,
        usage=usage,
        **number,
    )


def _usage(fields: Mapping[str, Value]) -> Usage:
    """A logged model step's usage, as its first intent event records it (run_log.PlannedCall)."""

    def number(name: str) -> float:
        return fields[name].number_value if name in fields else 0

    return Usage(int(number("input_tokens")), int(number("output_tokens")), number("cost"))


def _json(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
