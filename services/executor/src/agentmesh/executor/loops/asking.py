"""Asking a person (DESIGN §12, docs/human-in-the-loop.md): a tool call whose permission is `ask`
waits for an approval, a call of the built-in `ask_user` for an answer. The LLM loop does not run
such a call: it records an `input_requested` event for it and the run suspends (`RunSuspends`,
which `Run` turns into a parked run at the registry and a `run_suspended` stream end). The run
holds nothing while it waits; the person's one response reaches whichever executor resumes it
(OrphanedRun.input_requests), which records it as `input_received` before acting on it — so an
approved call runs at most once: a taker that finds the response recorded but no result treats
the call as in doubt, as any call of a resumed run.

A request's id is derived from its run, step and call, so the same call asked again (its run
resumed before it could suspend) is the same request: its event and its registry row are stored
once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.runtime import DELEGATE_TOOL, AgentRuntime
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.delegation.delegator import Delegator
from agentmesh.executor.delegation.outcome import SuspendedBelow
from agentmesh.executor.durability.recorder import EventType, NewEvent
from agentmesh.executor.durability.run_log import DELEGATION, TOOL, LoggedCall, PlannedCall
from agentmesh.executor.loops import client_tools
from agentmesh.executor.tools import permissions
from agentmesh.executor.tools.base import ToolAnswer, ToolOutput
from agentmesh.executor.tools.builtin import ASK_USER
from agentmesh.memory.v1.resources_pb2 import Event

DEFAULT_EXPIRY_SECONDS = 86_400
_REQUESTS = uuid.UUID("6f1c2a4e-8d0b-4f4e-9a57-3c1d2b7e5a10")  # namespace of request ids

APPROVAL = run_pb2.INPUT_KIND_APPROVAL
QUESTION = run_pb2.INPUT_KIND_QUESTION
CLIENT_TOOL = run_pb2.INPUT_KIND_CLIENT_TOOL
APPROVE = run_pb2.INPUT_DECISION_APPROVE
DENY = run_pb2.INPUT_DECISION_DENY
ANSWERED = run_pb2.INPUT_REQUEST_STATE_ANSWERED
EXPIRED = run_pb2.INPUT_REQUEST_STATE_EXPIRED
SYSTEM = "system"  # the registry's responder of an expired request

_KIND_NAMES = {APPROVAL: "approval", QUESTION: "question", CLIENT_TOOL: "client_tool"}
_KINDS = {name: kind for kind, name in _KIND_NAMES.items()}
_DECISION_NAMES = {APPROVE: "approve", DENY: "deny"}


class RunSuspends(Exception):
    """The run waits for a person's input: these requests of its own, recorded (each with its
    `seq`), and the runs below it that suspended (`below`: its delegations left open, whose
    requests are theirs to record and the top-level caller's to answer)."""

    def __init__(
        self, requests: Sequence[run_pb2.InputRequest], *, below: Sequence[SuspendedBelow] = ()
    ) -> None:
        super().__init__(
            f"the run waits for {len(requests)} request(s) for input and {len(below)} run(s) below"
        )
        self.requests = list(requests)
        self.below = list(below)

    @property
    def request_ids(self) -> list[str]:
        """Every request the run waits for, its own first."""
        return [request.id for request in self.requests] + [
            request_id for waiting in self.below for request_id in waiting.request_ids
        ]


def asks(call: PlannedCall) -> run_pb2.InputKind.ValueType | None:
    """What a planned call asks a person for before it may run: an approval (its tool's
    permission is `ask`), an answer (`ask_user`, or a remote A2A agent's question), its result
    (a client's tool: the client runs it), or nothing."""
    if call.error:
        return None
    if call.permission == client_tools.CLIENT:
        return CLIENT_TOOL
    if call.name == ASK_USER or call.remote_question or call.tool_question is not None:
        return QUESTION
    if call.permission == "ask":
        return APPROVAL
    return None


def request_id(run_id: str, call: PlannedCall) -> str:
    """The call's request's id: the same for the same call of the same run, however often asked.
    A remote task that asks again after an answer makes a new request, derived from the one
    answered."""
    if call.asked_after:
        return str(uuid.uuid5(_REQUESTS, f"{call.asked_after}/again"))
    return str(uuid.uuid5(_REQUESTS, f"{run_id}/{call.step}/{call.index}/{call.id}"))


def new_request(
    scope: RunScope, call: PlannedCall, kind: run_pb2.InputKind.ValueType, *, now: datetime | None = None
) -> run_pb2.InputRequest:
    """The request a call makes, as it is recorded and stored."""
    origin, spec = scope.origin, scope.spec
    created = now or datetime.now(UTC)
    expiry = spec.input_expiry_seconds or DEFAULT_EXPIRY_SECONDS
    request = run_pb2.InputRequest(
        id=request_id(origin.run_id, call),
        project_id=spec.agent.project_id,
        session_id=origin.session_id,
        run_id=origin.run_id,
        agent=origin.agent,
        delegation_path=list(origin.delegation_path),
        kind=kind,
        call_id=call.id,
        state=run_pb2.INPUT_REQUEST_STATE_PENDING,
    )
    if call.remote_question:
        # The remote agent asks, below this run: the request names it as a worker's would.
        request.agent = call.name
        request.delegation_path[:] = list(origin.child_path)
        request.question = call.remote_question
    elif call.tool_question is not None:
        request.tool = call.name  # its tool asks, in the middle of the call
        request.question = call.tool_question.question
    elif kind == QUESTION:
        request.question = str(call.arguments.get("question") or "")
    elif kind == CLIENT_TOOL:
        request.tool = call.name
        request.arguments.update(call.arguments)
        called = f"{call.name}({_arguments_text(call.arguments)})"
        request.question = f"{origin.agent} calls the client's tool {called}"
    else:
        # A delegation's approval names it as its permission rule does: `delegate:<agent>`.
        request.tool = f"{DELEGATE_TOOL}:{call.name}" if call.kind == DELEGATION else call.name
        request.arguments.update(call.arguments)
        request.question = f"May {origin.agent} call {request.tool}({_arguments_text(call.arguments)})?"
    request.created_at.FromDatetime(created)
    request.expires_at.FromDatetime(created + timedelta(seconds=expiry))
    return request


def requested_event(
    request: run_pb2.InputRequest, call_event_id: str, *, last: bool, tool_state: dict[str, Any] | None = None
) -> NewEvent:
    """The `input_requested` event of a request (`last`: the last one the run suspends on, where
    a follower of the log stops; `tool_state`: what a tool that asks goes on with)."""
    content: dict[str, Any] = {
        "request_id": request.id,
        "kind": _KIND_NAMES[request.kind],
        "tool": request.tool,
        "arguments": json_format.MessageToDict(request.arguments),
        "question": request.question,
        "delegation_path": list(request.delegation_path),
        "agent": request.agent,
        "expires_at": request.expires_at.ToJsonString(),
    }
    if tool_state is not None:
        content["tool_state"] = tool_state
    return NewEvent(
        EventType.EVENT_TYPE_INPUT_REQUESTED,
        content,
        metadata={
            "request_id": request.id,
            "call_id": request.call_id,
            "kind": _KIND_NAMES[request.kind],
            "last": last,
        },
        parent_event_id=call_event_id,
        idempotency_key=f"{request.id}:requested",
    )


def request_from_event(event: Event, scope: RunScope) -> run_pb2.InputRequest:
    """A request as its `input_requested` event recorded it (a run resumed before it could
    suspend asks again with the same request)."""
    content = json.loads(event.content)
    request = run_pb2.InputRequest(
        id=content["request_id"],
        project_id=scope.spec.agent.project_id,
        session_id=scope.origin.session_id,
        run_id=scope.origin.run_id,
        agent=content.get("agent") or scope.origin.agent,
        delegation_path=content.get("delegation_path") or [],
        kind=_KINDS.get(content.get("kind") or "", APPROVAL),
        tool=content.get("tool") or "",
        question=content.get("question") or "",
        call_id=event.metadata.fields["call_id"].string_value,
        state=run_pb2.INPUT_REQUEST_STATE_PENDING,
        seq=event.seq,
    )
    request.arguments.update(content.get("arguments") or {})
    request.created_at.CopyFrom(event.created_at)
    request.expires_at.FromJsonString(content["expires_at"])
    return request


def tool_answer(asked: Event, response: run_pb2.InputResponse, *, expired: bool) -> ToolAnswer | None:
    """The answer a tool that asked (its `input_requested` event: `asked`) goes on with — accept
    with the answer, or cancel when nobody answered in time — or None for any other request."""
    state = json.loads(asked.content).get("tool_state")
    if not isinstance(state, dict):
        return None
    if expired or response.reason == "expired":
        return ToolAnswer(state, "cancel")
    if declined(response, expired=expired):
        return ToolAnswer(state, "decline")
    return ToolAnswer(state, "accept", response.answer)


def declined(response: run_pb2.InputResponse, *, expired: bool) -> bool:
    """Whether a question's response is a person declining to answer it (`deny`), not an expiry
    (which the registry records as the system's denial)."""
    return (
        response.decision == DENY
        and not expired
        and response.responder != SYSTEM
        and not response.reason.startswith("expired")
    )


def received_event(request: run_pb2.InputRequest, asked_event_id: str) -> NewEvent:
    """The `input_received` event of a request's one response, recorded by the run that acts on
    it before it does."""
    response = request.response
    content: dict[str, Any] = {
        "request_id": request.id,
        "decision": _DECISION_NAMES.get(response.decision, ""),
        "answer": response.answer,
        "reason": response.reason,
        "responder": response.responder,
        "expired": request.state == EXPIRED,
    }
    if response.HasField("arguments"):
        content["arguments"] = json_format.MessageToDict(response.arguments)
    return NewEvent(
        EventType.EVENT_TYPE_INPUT_RECEIVED,
        content,
        metadata={"request_id": request.id, "call_id": request.call_id},
        parent_event_id=asked_event_id,
        idempotency_key=f"{request.id}:received",
    )


def response_from_event(event: Event) -> run_pb2.InputResponse:
    """A recorded response (`input_received`) as the InputResponse it was."""
    content = json.loads(event.content)
    response = run_pb2.InputResponse(
        decision={"approve": APPROVE, "deny": DENY}.get(content.get("decision") or "", 0),
        answer=content.get("answer") or "",
        reason=content.get("reason") or "",
        responder=content.get("responder") or "",
    )
    if isinstance(content.get("arguments"), dict):
        response.arguments.update(content["arguments"])
    if content.get("expired"):
        response.reason = response.reason or "expired"
    return response


@dataclass(frozen=True)
class Outcome:
    """What a response means for the call it answers: run it (with these arguments), or answer
    the model with `output` instead."""

    run: bool
    arguments: dict[str, Any]
    output: ToolOutput | None = None


def outcome(
    call: PlannedCall, request_kind: int, response: run_pb2.InputResponse, *, expired: bool
) -> Outcome:
    """How a call goes on after its request's response."""
    if request_kind == QUESTION and declined(response, expired=expired):
        who = response.responder or "the user"
        why = f"{who} declined to answer" + (f": {response.reason}" if response.reason else "")
        return Outcome(False, call.arguments, ToolOutput(f"{call.name}: no answer: {why}", is_error=True))
    if request_kind == QUESTION:
        return Outcome(False, call.arguments, ToolOutput(response.answer))
    if request_kind == CLIENT_TOOL and not expired and response.decision != DENY:
        return Outcome(False, call.arguments, ToolOutput(response.answer))  # the client ran it
    if response.decision == APPROVE and not expired:
        edited = json_format.MessageToDict(response.arguments) if response.HasField("arguments") else None
        return Outcome(True, edited if edited is not None else call.arguments)
    if request_kind == CLIENT_TOOL:
        why = "the client gave no result before the request expired"
    elif expired:
        why = "nobody approved it before the request expired"
    else:
        who = response.responder or "a person"
        why = f"{who} denied it" + (f": {response.reason}" if response.reason else "")
    return Outcome(False, call.arguments, ToolOutput(f"{call.name}: not run: {why}", is_error=True))


def requested_run_event(scope: RunScope, request: run_pb2.InputRequest) -> run_pb2.RunEvent:
    return scope.origin.event(seq=request.seq, input_requested=run_pb2.InputRequested(request=request))


def permitted(call: PlannedCall, runtime: AgentRuntime, scope: RunScope) -> PlannedCall:
    """The call with its permission (tools/permissions.py): one that may not run carries why (a
    delegation then becomes a refused call of the `delegate` tool, answered as such)."""
    as_sub_agent = scope.request.as_sub_agent
    if call.kind == TOOL and call.name in client_tools.names(scope.request):
        call.permission = client_tools.CLIENT  # no rule of the agent's: the client runs it
        return call
    if call.kind == TOOL:
        call.permission = runtime.permission(call.name, as_sub_agent=as_sub_agent)
        if call.permission == permissions.DENY and not call.error:
            call.error = permissions.NOT_PERMITTED
        return call
    if call.kind != DELEGATION:
        return call
    call.permission = runtime.delegation_permission(call.name)
    if call.permission != permissions.DENY:
        return call  # `ask`: recorded with its step, sent once approved (loops/llm.py)
    why = f"delegating to {call.name} is not permitted for this agent"
    refused = PlannedCall(TOOL, call.id, DELEGATE_TOOL, call.arguments, error=why, native=call.native)
    refused.step, refused.index, refused.usage = call.step, call.index, call.usage
    return refused


async def unasked_approval(
    open_call: LoggedCall, runtime: AgentRuntime, delegator: Delegator, scope: RunScope
) -> bool:
    """Whether an open delegation of a resumed run needs an approval its run stopped before
    asking for: its target's permission is `ask` (now), and no run received it."""
    call = open_call.call
    if runtime.delegation_permission(call.name) != permissions.ASK:
        return False
    call.permission = permissions.ASK
    return not await delegator.received(scope, call.name, open_call.event.delegation_id)


async def ask(scope: RunScope, held: Sequence[tuple[PlannedCall, str]]) -> list[run_pb2.InputRequest]:
    """Records a request for each held call (and its intent event's id), in one append whose last
    event is marked, and streams them: the requests, with their seqs."""
    requests = []
    for call, _ in held:
        kind = asks(call)
        assert kind is not None
        requests.append(new_request(scope, call, kind))
    events = await scope.recorder.record_many(
        [
            requested_event(
                request,
                call_event_id,
                last=place == len(held) - 1,
                tool_state=call.tool_question.state if call.tool_question is not None else None,
            )
            for place, (request, (call, call_event_id)) in enumerate(zip(requests, held, strict=True))
        ]
    )
    for request, event in zip(requests, events, strict=True):
        request.seq = event.seq
        await scope.sink.emit(requested_run_event(scope, request))
    return requests


def _arguments_text(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)[1:-1]
    return text if len(text) <= 200 else text[:199] + "…"
