"""The REST face's bodies for sessions and their events (DESIGN §4 and §6): what a session, a
page of its events and a fork look like on the wire. The other bodies are `schemas`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from agentmesh.gateway.http.schemas import EventTypeName, Page, RequestBody


class SessionOut(BaseModel):
    id: str
    project_id: str
    agent: str
    created_at: datetime | None
    updated_at: datetime | None
    last_seq: int
    first_seq: int
    forked_from_session_id: str = Field(default="", description="the session this one was forked from")
    forked_at_seq: int = Field(default=0, description="the source's seq it was forked at (0: not a fork)")


class SessionFork(RequestBody):
    at_seq: int = Field(ge=1, le=2**63 - 1, description="the last event of the source the fork sees")
    session_id: str = Field(default="", description="the new session's id; generated when empty")


class SessionPage(Page[SessionOut]):
    next_page_token: str = Field(description="token for the next page; empty on the last")


class EventOut(BaseModel):
    """An event (DESIGN §4); links that are not set are null."""

    id: str
    session_id: str
    seq: int
    agent: str
    event_type: EventTypeName
    content: str
    metadata: dict[str, Any]
    run_id: str | None
    parent_event_id: str | None
    delegation_id: str | None
    trace_id: str | None
    span_id: str | None
    created_at: datetime | None
    idempotency_key: str | None


_BYTE_LIMIT = (
    "the page stopped before page_size because its events reached the byte bound of a page; "
    "next_page_token goes on"
)


class SessionEventsOut(BaseModel):
    events: list[EventOut]
    next_page_token: str = Field(description="token for the next page; empty on the last")
    byte_limit_reached: bool = Field(default=False, description=_BYTE_LIMIT)


class SessionResetOut(BaseModel):
    session_id: str
    released_agents: int = Field(description="cached agents the executors released")


class AgentEventsOut(BaseModel):
    total: int
    events: list[EventOut]
    next_page_token: str = Field(description="token for the next page; empty on the last")
    byte_limit_reached: bool = Field(default=False, description=_BYTE_LIMIT)
