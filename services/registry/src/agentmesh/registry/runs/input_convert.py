"""The registry's requests for a person's input between their v1 messages
(`agentmesh.common.v1` InputRequest, InputResponse) and the rules' models."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from google.protobuf import timestamp_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.registry.errors import ValidationFailed
from agentmesh.registry.runs.input_models import (
    InputDecision,
    InputKind,
    InputRequest,
    InputRequestState,
    InputResponse,
    RaisedInput,
)
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.protos import struct, struct_to_dict, timestamp

_INPUT_KIND_TO_PROTO = {
    InputKind.APPROVAL: run_pb2.INPUT_KIND_APPROVAL,
    InputKind.QUESTION: run_pb2.INPUT_KIND_QUESTION,
    InputKind.CLIENT_TOOL: run_pb2.INPUT_KIND_CLIENT_TOOL,
}
_INPUT_KIND_FROM_PROTO = {value: kind for kind, value in _INPUT_KIND_TO_PROTO.items()}
_INPUT_STATE_TO_PROTO = {
    InputRequestState.PENDING: run_pb2.INPUT_REQUEST_STATE_PENDING,
    InputRequestState.ANSWERED: run_pb2.INPUT_REQUEST_STATE_ANSWERED,
    InputRequestState.EXPIRED: run_pb2.INPUT_REQUEST_STATE_EXPIRED,
    InputRequestState.CANCELLED: run_pb2.INPUT_REQUEST_STATE_CANCELLED,
}
_INPUT_STATE_FROM_PROTO = {value: state for state, value in _INPUT_STATE_TO_PROTO.items()}
_DECISION_TO_PROTO = {
    InputDecision.APPROVE: run_pb2.INPUT_DECISION_APPROVE,
    InputDecision.DENY: run_pb2.INPUT_DECISION_DENY,
}
_DECISION_FROM_PROTO = {value: decision for decision, value in _DECISION_TO_PROTO.items()}


def raised_inputs(messages: Sequence[run_pb2.InputRequest]) -> list[RaisedInput]:
    """A SuspendRun's requests as its executor raised them."""
    violations = [
        FieldViolation(f"input_requests[{index}].kind", "must be approval, question or client_tool")
        for index, message in enumerate(messages)
        if message.kind not in _INPUT_KIND_FROM_PROTO
    ]
    if violations:
        raise ValidationFailed.of(violations)
    return [
        RaisedInput(
            id=message.id,
            kind=_INPUT_KIND_FROM_PROTO[message.kind],
            delegation_path=list(message.delegation_path),
            tool=message.tool,
            arguments=struct_to_dict(message.arguments) if message.HasField("arguments") else None,
            question=message.question,
            call_id=message.call_id,
            seq=message.seq,
            created_at=_moment(message, "created_at"),
            expires_at=_moment(message, "expires_at"),
        )
        for message in messages
    ]


def input_request_state(value: int) -> InputRequestState:
    """A ListInputRequests state filter: unset is pending."""
    if value == run_pb2.INPUT_REQUEST_STATE_UNSPECIFIED:
        return InputRequestState.PENDING
    if value not in _INPUT_STATE_FROM_PROTO:
        raise ValidationFailed.of(
            [FieldViolation("state", "must be pending, answered, expired or cancelled")]
        )
    return _INPUT_STATE_FROM_PROTO[value]


def input_response(message: run_pb2.InputResponse) -> InputResponse:
    """A person's response as a RespondToInputRequest carries it (who and when are the registry's)."""
    if message.decision not in (*_DECISION_FROM_PROTO, run_pb2.INPUT_DECISION_UNSPECIFIED):
        raise ValidationFailed.of([FieldViolation("response.decision", "must be approve or deny")])
    return InputResponse(
        decision=_DECISION_FROM_PROTO.get(message.decision),
        reason=message.reason,
        answer=message.answer,
        arguments=struct_to_dict(message.arguments) if message.HasField("arguments") else None,
    )


def _moment(message: run_pb2.InputRequest, field: str) -> datetime | None:
    value: timestamp_pb2.Timestamp = getattr(message, field)
    return value.ToDatetime(tzinfo=UTC) if message.HasField(field) else None


# --- domain → proto ------------------------------------------------------------------------------


def input_request_message(request: InputRequest) -> run_pb2.InputRequest:
    message = run_pb2.InputRequest(
        id=request.id,
        project_id=request.project_id,
        session_id=request.session_id,
        run_id=request.run_id,
        agent=request.agent,
        delegation_path=request.delegation_path,
        kind=_INPUT_KIND_TO_PROTO[request.kind],
        tool=request.tool,
        question=request.question,
        call_id=request.call_id,
        created_at=timestamp(request.created_at),
        expires_at=timestamp(request.expires_at),
        state=_INPUT_STATE_TO_PROTO[request.state],
        seq=request.seq,
    )
    if request.arguments is not None:
        message.arguments.CopyFrom(struct(request.arguments))
    if request.response is not None:
        message.response.CopyFrom(input_response_message(request.response))
    return message


def input_response_message(response: InputResponse) -> run_pb2.InputResponse:
    message = run_pb2.InputResponse(
        decision=run_pb2.INPUT_DECISION_UNSPECIFIED
        if response.decision is None
        else _DECISION_TO_PROTO[response.decision],
        reason=response.reason,
        answer=response.answer,
        responder=response.responder,
    )
    if response.arguments is not None:
        message.arguments.CopyFrom(struct(response.arguments))
    if response.responded_at is not None:
        message.responded_at.CopyFrom(timestamp(response.responded_at))
    return message
