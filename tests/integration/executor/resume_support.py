"""What the tests of resuming a run from the log share (test_resume_from_log.py and the modules
built on it): the mesh's settings — short leases, an OpenAI-compatible test server as the model —
as module fixtures a test module imports to override conftest's, and `DeadRun`, the log and
registry row a dead executor leaves behind."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.protos import struct
from tests.bearer import service_channel
from tests.integration.executor.openai_server import FakeOpenAI
from tests.integration.executor.support import Agent, Event, EventType, Stack, event_type
from tests.mesh import JWT_SECRET, bearer
from tests.polling import eventually

# Short, so a dead executor's run is taken over within seconds; not shorter, because the live
# executor's renewals must reach the registry within a lease even on a loaded host (with 1 s,
# renewals late under load expired the live runs' leases too, and counted them out mid-run).
LEASE_SECONDS = 3.0


@pytest.fixture(scope="module")
def executor_settings(openai_server: FakeOpenAI) -> dict[str, Any]:
    return {
        "lease_renew_interval_seconds": 0.5,
        "openai_base_url": openai_server.base_url,
        "openai_api_key": "sk-resume-" + "r" * 30,
    }


@pytest.fixture(scope="module")
def registry_settings() -> dict[str, Any]:
    return {
        "run_lease_seconds": LEASE_SECONDS,
        "run_lease_sweep_seconds": 0.2,
        "run_lease_startup_grace_seconds": 0,
    }


class DeadRun:
    """A run as a dead executor left it: its events, and its row at the registry."""

    def __init__(self, stack: Stack, agent: Agent, *, session_id: str = "") -> None:
        self.stack = stack
        self.agent = agent
        self.session_id = session_id or f"s-{uuid.uuid4().hex[:8]}"
        self.run_id = uuid.uuid4().hex
        self._position = 0

    def event(
        self,
        kind: int,
        content: str | dict[str, Any],
        *,
        run_id: str = "",
        agent: str = "",
        delegation_id: str = "",
        parent_event_id: str = "",
        **metadata: Any,
    ) -> memory_service_pb2.NewEvent:
        self._position += 1
        new = memory_service_pb2.NewEvent(
            agent=agent or self.agent.name,
            event_type=kind,
            content=content if isinstance(content, str) else json.dumps(content),
            run_id=run_id or self.run_id,
            delegation_id=delegation_id,
            parent_event_id=parent_event_id,
            idempotency_key=f"test:{self.run_id}:{self._position}",
        )
        new.metadata.CopyFrom(struct(metadata))
        return new

    async def record(self, *events: memory_service_pb2.NewEvent) -> list[Event]:
        response = await self.stack.memory.AppendEvents(
            memory_service_pb2.AppendEventsRequest(
                session_id=self.session_id, project_id=self.agent.project.id, events=list(events)
            ),
            metadata=self.stack.metadata,
        )
        return list(response.events)

    async def orphan(self) -> None:
        """Starts the run at the registry as held by an executor that never renews it."""
        channel = service_channel(self.stack.mesh.services["registry"].address)
        try:
            await RegistryClient(channel).start_agent_run(
                self.agent.id,
                self.run_id,
                session_id=self.session_id,
                executor_id="dead-executor",
                metadata=bearer(TokenCodec(JWT_SECRET).system_token()),
            )
        finally:
            await channel.close()

    async def ended(self) -> list[Event]:
        """The session's log once the run has its final event."""

        async def end() -> bool:
            events = await self.stack.events(self.session_id)
            return any(e.run_id == self.run_id and final(e) for e in events)

        await eventually(end, timeout=LEASE_SECONDS * 20, what=f"run {self.run_id} ends")
        return await self.stack.events(self.session_id)


def final(event: Event) -> bool:
    return event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE or (
        event.event_type == EventType.EVENT_TYPE_ERROR and "code" in event.metadata.fields
    )


def as_dicts(events: Sequence[Event]) -> list[dict[str, Any]]:

    return [
        {
            "seq": e.seq,
            "run_id": e.run_id,
            "agent": e.agent,
            "event_type": event_type(e),
            "delegation_id": e.delegation_id,
            "metadata": MessageToDict(e.metadata),
        }
        for e in events
    ]


def step(call_id: str, index: int, **extra: Any) -> dict[str, Any]:
    return {"call_id": call_id, "step": 1, "index": index, "native": True, **extra}
