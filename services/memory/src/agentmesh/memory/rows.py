"""Rows of the memory tables as models, and the conditions and look-ups the SQL store shares
(`store.py`): kept apart so that the store holds only what it does with them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentmesh.memory.fence import END_KEY_SUFFIX
from agentmesh.memory.models import CANCELLED_CODE, Event, EventQuery, EventType, RunState, Session
from agentmesh.memory.tables import EVENT_COLUMNS, EVENT_FIELDS, event_table

# The hex digit holding a UUID's variant (RFC 4122: its top bits 10), by the random digit it replaces.
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def new_event_ids(count: int) -> list[str]:
    """`count` new event ids: random (version 4) UUIDs as text, all from one `os.urandom` call —
    `str(uuid.uuid4())` an id costs 4.5 µs, which an append of many events pays for each."""
    digits = os.urandom(16 * count).hex()
    return [
        f"{d[:8]}-{d[8:12]}-4{d[13:16]}-{_VARIANT_DIGIT[d[16]]}{d[17:20]}-{d[20:]}"
        for d in (digits[start : start + 32] for start in range(0, 32 * count, 32))
    ]


def utc(moment: datetime) -> datetime:
    # SQLite keeps no time zone; every time stored here is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def event_row(row: Sequence[Any]) -> Event:
    values = dict(zip(EVENT_FIELDS, row, strict=True))
    values["event_type"] = EventType(values["event_type"])
    values["metadata"] = values["metadata"] or {}
    values["idempotency_key"] = values["idempotency_key"] or ""
    values["created_at"] = utc(values["created_at"])
    # Rows were validated on the way in; skip validating them again on every read.
    return Event.model_construct(**values)


def session_row(row: Sequence[Any]) -> Session:
    (
        id_,
        project_id,
        agent,
        created,
        updated,
        last_seq,
        first_seq,
        context_start_seq,
        forked_from,
        forked_at,
        lineage,
    ) = row
    return Session.model_construct(
        id=id_,
        project_id=project_id,
        agent=agent,
        created_at=utc(created),
        updated_at=utc(updated),
        last_seq=last_seq,
        first_seq=first_seq,
        context_start_seq=context_start_seq,
        forked_from_session_id=forked_from,
        forked_at_seq=forked_at,
        lineage=tuple((source, bound) for source, bound in lineage or ()),
    )


def event_conditions(query: EventQuery) -> list[sa.ColumnElement[bool]]:
    c = event_table.c
    conditions = [c.project_id == query.project_id]
    if query.session_id:
        conditions.append(_in_session(query))
    if query.agent:
        conditions.append(c.agent == query.agent)
    if query.event_types:
        conditions.append(c.event_type.in_([kind.value for kind in query.event_types]))
    if query.run_id:
        conditions.append(c.run_id == query.run_id)
    if query.after_seq:
        conditions.append(c.seq > query.after_seq)
    if query.filters_runs:
        conditions.append(c.run_id != "")
    if query.run_states:
        conditions.append(_run_in(query.run_states))
    if query.run_active_since is not None:
        later = event_table.alias("run_later")
        conditions.append(
            sa.exists().where(
                later.c.project_id == c.project_id,
                later.c.session_id == c.session_id,
                later.c.run_id == c.run_id,
                later.c.created_at >= query.run_active_since,
            )
        )
    return conditions


def _in_session(query: EventQuery) -> sa.ColumnElement[bool]:
    """The session's own events, and a fork's inherited ones: each session of its lineage up to
    its bound and above the next one's (the seq ranges are disjoint, so seq order is kept)."""
    c = event_table.c
    if not query.lineage:
        return c.session_id == query.session_id
    parts = [sa.and_(c.session_id == query.session_id, c.seq > query.lineage[0][1])]
    for index, (source, bound) in enumerate(query.lineage):
        below = query.lineage[index + 1][1] if index + 1 < len(query.lineage) else 0
        parts.append(sa.and_(c.session_id == source, c.seq <= bound, c.seq > below))
    return sa.or_(*parts)


def _run_in(states: Sequence[RunState]) -> sa.ColumnElement[bool]:
    """The event's run is in one of `states`, by its final event (RunState.of, in SQL): the one
    event of its session keyed `<run_id>:end`, found through the idempotency key's index."""
    c = event_table.c
    end = event_table.alias("run_end")
    ended = [
        end.c.project_id == c.project_id,
        end.c.session_id == c.session_id,
        end.c.idempotency_key == c.run_id + END_KEY_SUFFIX,
    ]
    code = end.c["metadata"]["code"].as_string()
    error = end.c.event_type == EventType.ERROR.value
    how = {
        RunState.ANSWERED: end.c.event_type == EventType.AGENT_RESPONSE.value,
        RunState.CANCELLED: sa.and_(error, code == CANCELLED_CODE),
        RunState.FAILED: sa.and_(error, sa.or_(code.is_(None), code != CANCELLED_CODE)),
    }
    endings = [how[state] for state in states if state in how]
    wanted = [sa.exists().where(*ended, sa.or_(*endings))] if endings else []
    if RunState.RUNNING in states:
        wanted.append(~sa.exists().where(*ended))
    return sa.or_(*wanted)


async def events_by_key(
    connection: AsyncConnection, session_id: str, project_id: str, keys: Sequence[str]
) -> dict[str, Event]:
    """The session's events holding these idempotency keys, by key."""
    query = sa.select(*EVENT_COLUMNS).where(
        event_table.c.project_id == project_id,
        event_table.c.session_id == session_id,
        event_table.c.idempotency_key.in_(list(keys)),
    )
    rows = (await connection.execute(query)).all()
    return {event.idempotency_key: event for event in map(event_row, rows)}
