"""What the SQL store makes of new rows without the database."""

from __future__ import annotations

import uuid

from agentmesh.memory.rows import new_event_ids


def test_new_event_ids_are_distinct_random_uuids_as_text() -> None:
    ids = new_event_ids(1000)
    assert len(set(ids)) == 1000
    for event_id in ids:
        parsed = uuid.UUID(event_id)
        assert str(parsed) == event_id  # the canonical lower-case text, 36 characters
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert {event_id[19] for event_id in ids} == set("89ab")  # the variant's two random bits vary
    assert new_event_ids(0) == []
