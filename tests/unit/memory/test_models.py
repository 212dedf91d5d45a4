"""The domain values' fast construction from trusted data."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentmesh.memory.models import Event, EventType, NewEvent

NEW_EVENT = {
    "agent": "writer",
    "event_type": EventType.TOOL_CALL,
    "content": "look it up",
    "metadata": {"attempt": 2},
    "run_id": "run-1",
    "parent_event_id": "e-0",
    "delegation_id": "d-1",
    "trace_id": "0" * 32,
    "span_id": "1" * 16,
    "idempotency_key": "run-1:step:1",
}
EVENT = NEW_EVENT | {
    "id": "e-1",
    "session_id": "s-1",
    "seq": 7,
    "created_at": datetime(2026, 1, 2, tzinfo=UTC),
}


@pytest.mark.parametrize(("model", "values"), [(NewEvent, NEW_EVENT), (Event, EVENT)])
def test_trusted_makes_what_model_construct_makes(model: type[NewEvent], values: dict) -> None:
    # `trusted` sets pydantic's own attributes as model_construct does; a pydantic that keeps
    # others fails here, not in production.
    made, constructed = model.trusted(dict(values)), model.model_construct(**values)
    assert made == constructed
    assert vars(made) == vars(constructed)
    assert made.model_fields_set == constructed.model_fields_set == set(model.model_fields)
    assert made.model_dump() == constructed.model_dump()
    assert made.model_copy(update={"content": "x"}) == constructed.model_copy(update={"content": "x"})
    assert made.same_payload(constructed)
    with pytest.raises(ValueError, match="frozen"):
        made.content = "changed"  # type: ignore[misc]
