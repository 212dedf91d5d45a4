"""Pure conversions: protobuf messages ↔ domain types ↔ the JSON shapes of DESIGN §4.

Enum values the domain cannot hold (EVENT_TYPE_UNSPECIFIED, numbers from a newer proto) are
refused here, naming the field, because this is the last place that still sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import timestamp_pb2

from agentmesh.memory import models
from agentmesh.memory.errors import FieldViolation, ValidationFailed
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.protos import struct, struct_to_dict, timestamp

_PREFIX = "EVENT_TYPE_"
_TO_PROTO: dict[models.EventType, resources_pb2.EventType.ValueType] = {
    kind: resources_pb2.EventType.Value(_PREFIX + kind.name) for kind in models.EventType
}
_FROM_PROTO: dict[int, models.EventType] = {number: kind for kind, number in _TO_PROTO.items()}


def event_type_name(event_type: int) -> str:
    """The JSON name of a protobuf event type: EVENT_TYPE_USER_MESSAGE → "user_message"."""
    try:
        return _FROM_PROTO[event_type].value
    except KeyError:
        raise ValueError(f"not a storable event type: {event_type}") from None


def event_type_from_name(name: str) -> resources_pb2.EventType.ValueType:
    """The protobuf event type of a JSON name: "user_message" → EVENT_TYPE_USER_MESSAGE.

    Raises ValueError for anything else (names are lower case, without the prefix)."""
    try:
        return _TO_PROTO[models.EventType(name)]
    except ValueError:
        raise ValueError(f"unknown event type {name!r}; one of {', '.join(event_type_names())}") from None


def event_type_names() -> list[str]:
    """Every event type's JSON name, in protobuf order."""
    return [kind.value for kind in models.EventType]


def _domain_event_type(number: int, field: str) -> models.EventType | FieldViolation:
    kind = _FROM_PROTO.get(number)
    if kind is None:
        return FieldViolation(field, f"must be one of {', '.join(event_type_names())} (got {number})")
    return kind


# --- JSON values -----------------------------------------------------------------------------


def _iso(stamp: timestamp_pb2.Timestamp) -> str | None:
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


# --- protobuf → domain -----------------------------------------------------------------------


def new_events_from_proto(events: Sequence[pb.NewEvent]) -> list[models.NewEvent]:
    violations: list[FieldViolation] = []
    converted: list[models.NewEvent] = []
    for index, event in enumerate(events):
        kind = _domain_event_type(event.event_type, f"events[{index}].event_type")
        if isinstance(kind, FieldViolation):
            violations.append(kind)
            continue
        try:
            metadata = struct_to_dict(event.metadata)
        except ValueError:  # NaN or ±Infinity: not JSON
            violations.append(FieldViolation(f"events[{index}].metadata", "must hold JSON numbers only"))
            continue
        # Built without pydantic's validation: protobuf typed every field already (an
        # AppendEvents of many events spent most of its time converting them).
        converted.append(
            models.NewEvent.trusted(
                {
                    "agent": event.agent,
                    "event_type": kind,
                    "content": event.content,
                    "metadata": metadata,
                    "run_id": event.run_id,
                    "parent_event_id": event.parent_event_id,
                    "delegation_id": event.delegation_id,
                    "trace_id": event.trace_id,
                    "span_id": event.span_id,
                    "idempotency_key": event.idempotency_key,
                }
            )
        )
    if violations:
        raise ValidationFailed.of(violations)
    return converted


_RUN_STATE_PREFIX = "RUN_STATE_"
_RUN_STATES: dict[int, models.RunState] = {
    resources_pb2.RunState.Value(_RUN_STATE_PREFIX + state.name): state for state in models.RunState
}


def event_query_from_proto(request: pb.ListEventsRequest) -> models.EventQuery:
    kinds: list[models.EventType] = []
    violations: list[FieldViolation] = []
    for index, number in enumerate(request.event_types):
        kind = _domain_event_type(number, f"event_types[{index}]")
        if isinstance(kind, FieldViolation):
            violations.append(kind)
        else:
            kinds.append(kind)
    states: list[models.RunState] = []
    for index, number in enumerate(request.run_states):
        if (state := _RUN_STATES.get(number)) is None:
            names = ", ".join(_RUN_STATE_PREFIX + s.name for s in models.RunState)
            problem = f"must be one of {names} (got {number})"
            violations.append(FieldViolation(f"run_states[{index}]", problem))
        else:
            states.append(state)
    if violations:
        raise ValidationFailed.of(violations)
    return models.EventQuery(
        session_id=request.session_id,
        project_id=request.project_id,
        agent=request.agent,
        # A set of types: order and repeats do not change the result (nor the page token).
        event_types=tuple(sorted(set(kinds))),
        run_id=request.run_id,
        after_seq=request.after_seq,
        descending=request.descending,
        from_context_start=request.from_context_start,
        run_states=tuple(sorted(set(states))),
        run_active_since=(
            request.run_active_since.ToDatetime(tzinfo=UTC) if request.HasField("run_active_since") else None
        ),
    )


def retention_policy_from_proto(policy: resources_pb2.RetentionPolicy) -> models.RetentionPolicy:
    return models.RetentionPolicy.model_construct(
        project_id=policy.project_id,
        max_age_seconds=policy.max_age_seconds,
        max_events_per_session=policy.max_events_per_session,
    )


# --- domain → protobuf -----------------------------------------------------------------------


def event_to_proto(event: models.Event) -> resources_pb2.Event:
    return resources_pb2.Event(
        id=event.id,
        session_id=event.session_id,
        seq=event.seq,
        agent=event.agent,
        event_type=_TO_PROTO[event.event_type],
        content=event.content,
        metadata=struct(event.metadata),
        run_id=event.run_id,
        parent_event_id=event.parent_event_id,
        delegation_id=event.delegation_id,
        trace_id=event.trace_id,
        span_id=event.span_id,
        created_at=timestamp(event.created_at),
        idempotency_key=event.idempotency_key,
    )


def events_to_proto(events: Iterable[models.Event]) -> list[resources_pb2.Event]:
    return [event_to_proto(event) for event in events]


def append_response(result: models.AppendResult, *, receipts_only: bool) -> pb.AppendEventsResponse:
    """An append's answer: its events whole, or with `receipts_only` each one's id, session, seq
    and time, without echoing the content its writer sent (converting that back costs more than
    storing it)."""
    response = pb.AppendEventsResponse(last_seq=result.last_seq)
    if not receipts_only:
        response.events.extend(events_to_proto(result.events))
        return response
    # Each receipt is added in place (a message handed to the response is copied into it), and
    # each time converted once: an append's new events share theirs.
    receipts = response.events
    stamps: dict[datetime, timestamp_pb2.Timestamp] = {}
    for event in result.events:
        stamp = stamps.get(event.created_at)
        if stamp is None:
            stamp = stamps[event.created_at] = timestamp(event.created_at)
        receipts.add(id=event.id, session_id=event.session_id, seq=event.seq, created_at=stamp)
    return response


def session_to_proto(session: models.Session) -> resources_pb2.Session:
    return resources_pb2.Session(
        id=session.id,
        project_id=session.project_id,
        agent=session.agent,
        created_at=timestamp(session.created_at),
        updated_at=timestamp(session.updated_at),
        last_seq=session.last_seq,
        first_seq=session.first_seq,
        context_start_seq=session.context_start_seq,
        forked_from_session_id=session.forked_from_session_id,
        forked_at_seq=session.forked_at_seq,
    )


def retention_policy_to_proto(policy: models.RetentionPolicy) -> resources_pb2.RetentionPolicy:
    return resources_pb2.RetentionPolicy(
        project_id=policy.project_id,
        max_age_seconds=policy.max_age_seconds,
        max_events_per_session=policy.max_events_per_session,
    )


# --- protobuf → JSON (DESIGN §4, for the gateway's REST routes) -----------------------------


def event_to_dict(event: resources_pb2.Event) -> dict[str, Any]:
    """An event as REST/JSON shows it, with exactly the field names of DESIGN §4.

    `event_type` is the lower-case name; `created_at` ISO-8601 in UTC; optional links that are
    not set (`run_id`, `parent_event_id`, `delegation_id`, `trace_id`, `span_id`,
    `idempotency_key`) are null."""
    return {
        "id": event.id,
        "session_id": event.session_id,
        "seq": event.seq,
        "agent": event.agent,
        "event_type": event_type_name(event.event_type),
        "content": event.content,
        "metadata": struct_to_dict(event.metadata),
        "run_id": event.run_id or None,
        "parent_event_id": event.parent_event_id or None,
        "delegation_id": event.delegation_id or None,
        "trace_id": event.trace_id or None,
        "span_id": event.span_id or None,
        "created_at": _iso(event.created_at),
        "idempotency_key": event.idempotency_key or None,
    }


def session_to_dict(session: resources_pb2.Session) -> dict[str, Any]:
    """A session as REST/JSON shows it."""
    return {
        "id": session.id,
        "project_id": session.project_id,
        "agent": session.agent,
        "created_at": _iso(session.created_at),
        "updated_at": _iso(session.updated_at),
        "last_seq": session.last_seq,
        "first_seq": session.first_seq,
        "context_start_seq": session.context_start_seq,
        "forked_from_session_id": session.forked_from_session_id,
        "forked_at_seq": session.forked_at_seq,
    }
