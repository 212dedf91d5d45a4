"""Records a run's steps as events in the memory service, tagged with the current trace."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import struct_pb2

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.runtime.telemetry import current_trace_ids

EventType = resources_pb2.EventType


class Recorder:
    """Appends one agent's events for one run to its session."""

    def __init__(
        self,
        memory: MemoryClient,
        *,
        session_id: str,
        project_id: str,
        agent: str,
        run_id: str,
        delegation_id: str = "",
    ) -> None:
        self._memory = memory
        self.session_id = session_id
        self.project_id = project_id
        self.agent = agent
        self.run_id = run_id
        self.delegation_id = delegation_id

    async def record(
        self,
        event_type: EventType.ValueType,
        content: str | dict[str, Any] | list[Any],
        *,
        metadata: dict[str, Any] | None = None,
        parent_event_id: str = "",
        delegation_id: str | None = None,
    ) -> resources_pb2.Event:
        trace_id, span_id = current_trace_ids()
        event = memory_service_pb2.NewEvent(
            agent=self.agent,
            event_type=event_type,
            content=content if isinstance(content, str) else json.dumps(content),
            run_id=self.run_id,
            parent_event_id=parent_event_id,
            delegation_id=self.delegation_id if delegation_id is None else delegation_id,
            trace_id=trace_id,
            span_id=span_id,
        )
        if metadata:
            event.metadata.CopyFrom(_struct(metadata))
        response = await self._memory.append_events(self.session_id, self.project_id, [event])
        return response.events[0]


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(values)
    return struct
