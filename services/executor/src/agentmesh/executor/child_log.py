"""How a delegated run ended, read from the session's log: what a run resumed on another executor
waits for when its executor died with a delegation open (docs/durability.md, "Resume").

The delegated (child) run is a run of its own with its own lease: when its executor dies too it is
resumed by whoever takes it over; when it lives on, its caller's death cancelled it. Either way it
ends with exactly one final event in the session (recorder.end_key), found here by the
`delegation_id` its input (`task_delegation_received`) carries.
"""

from __future__ import annotations

import asyncio

from agentmesh.executor.recorder import EventType
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.runtime.errors import NotFound

_POLL_SECONDS = 0.25
# The note a delegating run records the moment a remote A2A agent names the task it made of the
# delegation (an `error` event with no code: the run goes on), so that a resumed run follows that
# task instead of sending the delegation again (docs/durability.md, "Remote delegations").
REMOTE_TASK_ACCEPTED = "REMOTE_TASK_ACCEPTED"


def remote_task_key(delegation_id: str) -> str:
    """The idempotency key of a delegation's one REMOTE_TASK_ACCEPTED note."""
    return f"{delegation_id}:remote_task"


def is_final(event: resources_pb2.Event) -> bool:
    """A run's one final event: its answer, or an `error` that ended it (those carry a code)."""
    if event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
        return True
    return event.event_type == EventType.EVENT_TYPE_ERROR and "code" in event.metadata.fields


class ChildLog:
    """Reads delegated runs' inputs and ends in one session's log."""

    def __init__(self, memory: MemoryClient, *, session_id: str, project_id: str) -> None:
        self._memory = memory
        self._session_id = session_id
        self._project_id = project_id

    async def child_run(self, delegation_id: str) -> str:
        """The run that received the delegation ("" when none recorded its input)."""
        events = await self._list(event_types=[EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED])
        return next((e.run_id for e in events if e.delegation_id == delegation_id), "")

    async def remote_task(self, delegation_id: str) -> str:
        """The id of the remote A2A task the delegation became ("" when none was recorded)."""
        events = await self._list(event_types=[EventType.EVENT_TYPE_ERROR])
        for event in events:
            meta = event.metadata.fields
            if (
                event.delegation_id == delegation_id
                and "reason" in meta
                and meta["reason"].string_value == REMOTE_TASK_ACCEPTED
            ):
                return meta["remote_task_id"].string_value if "remote_task_id" in meta else ""
        return ""

    async def end(self, run_id: str) -> resources_pb2.Event | None:
        events = await self._list(
            run_id=run_id, event_types=[EventType.EVENT_TYPE_AGENT_RESPONSE, EventType.EVENT_TYPE_ERROR]
        )
        return next((e for e in events if is_final(e)), None)

    async def wait_end(self, run_id: str) -> resources_pb2.Event:
        """The run's final event, once it is recorded (the caller bounds the wait)."""
        while True:
            event = await self.end(run_id)
            if event is not None:
                return event
            await asyncio.sleep(_POLL_SECONDS)

    async def _list(self, **filters: object) -> list[resources_pb2.Event]:
        request = memory_service_pb2.ListEventsRequest(
            session_id=self._session_id,
            project_id=self._project_id,
            **filters,  # type: ignore[arg-type]
        )
        try:
            return [event async for event in self._memory.iter_events(request)]
        except NotFound:
            return []


def end_outcome(event: resources_pb2.Event) -> tuple[bool, str, str]:
    """(completed, content or message, gRPC code name) of a run's final event."""
    if event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
        return True, event.content, ""
    code = event.metadata.fields["code"].string_value
    return False, event.content, code
