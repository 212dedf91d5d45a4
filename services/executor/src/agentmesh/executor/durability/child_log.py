"""How a child run (a delegated run, a workflow's sub-agent run) ended, read from the session's
log: what a run resumed on another executor waits for when its executor died with a child open,
and what a caller follows when its child's stream broke (docs/durability.md, "Resume").

The child run is a run of its own with its own lease: when its executor dies too it is resumed by
whoever takes it over; when it lives on, it outlives its caller's broken stream (`caller_run_id`).
Either way it ends with exactly one final event in the session (recorder.end_key), found here by
the `delegation_id` its input (`task_delegation_received`) carries, or the `sub_agent_id` in its
input's metadata (a workflow's sub-agent).
"""

from __future__ import annotations

import asyncio
import logging

from agentmesh.executor.durability.recorder import EventType
from agentmesh.executor.durability.transient import is_transient
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import NotFound

logger = logging.getLogger(__name__)

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

    def __init__(
        self,
        memory: MemoryClient,
        *,
        session_id: str,
        project_id: str,
        metadata: Metadata | None = None,
    ) -> None:
        self._memory = memory
        self._session_id = session_id
        self._project_id = project_id
        self._metadata = metadata  # None: the calling run's own token

    async def child_run(self, delegation_id: str) -> str:
        """The run that received the delegation ("" when none recorded its input): the last one
        that did. An executor that refused it may have recorded its input and the refusal before
        the delegation was placed on another executor, under a run id of its own."""
        events = await self._list(event_types=[EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED])
        return next((e.run_id for e in reversed(events) if e.delegation_id == delegation_id), "")

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

    async def sub_agent_runs(self, caller: resources_pb2.Event) -> dict[str, str] | None:
        """The sub-agent runs a workflow started, by `sub_agent_id` (their run ids); `caller` is
        the workflow run's input. None when one of them was recorded without its id (a log from
        before sub-agent ids): which sub-agent it was is not decidable."""
        prefix = f"{caller.run_id}:"
        runs: dict[str, str] = {}
        for event in await self._list(event_types=[EventType.EVENT_TYPE_USER_MESSAGE]):
            meta = event.metadata.fields
            if "sub_agent_id" in meta and meta["sub_agent_id"].string_value.startswith(prefix):
                runs.setdefault(meta["sub_agent_id"].string_value, event.run_id)
            elif event.parent_event_id == caller.id and "as_sub_agent" in meta:
                return None
        return runs

    async def abandoned(self, caller_run_id: str, delegation_id: str) -> bool:
        """Whether the caller's run went on without its child: it recorded its own end, or (a
        delegation) the delegation's response."""
        events = await self._list(
            run_id=caller_run_id,
            event_types=[
                EventType.EVENT_TYPE_AGENT_RESPONSE,
                EventType.EVENT_TYPE_ERROR,
                EventType.EVENT_TYPE_DELEGATION_RESPONSE,
            ],
        )
        return any(
            is_final(e)
            or (
                delegation_id
                and e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE
                and e.delegation_id == delegation_id
            )
            for e in events
        )

    async def end(self, run_id: str) -> resources_pb2.Event | None:
        events = await self._list(
            run_id=run_id, event_types=[EventType.EVENT_TYPE_AGENT_RESPONSE, EventType.EVENT_TYPE_ERROR]
        )
        return next((e for e in events if is_final(e)), None)

    async def wait_end(self, run_id: str) -> resources_pb2.Event:
        """The run's final event, once it is recorded (the caller bounds the wait). A memory
        service that is away meanwhile is asked again: the end is kept until it is back."""
        while True:
            try:
                event = await self.end(run_id)
            except Exception as error:
                if not is_transient(error):
                    raise
                logger.warning("cannot read the end of run %s yet: %s", run_id, error)
                event = None
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
            return [event async for event in self._memory.iter_events(request, metadata=self._metadata)]
        except NotFound:
            return []


def end_outcome(event: resources_pb2.Event) -> tuple[bool, str, str]:
    """(completed, content or message, gRPC code name) of a run's final event."""
    if event.event_type == EventType.EVENT_TYPE_AGENT_RESPONSE:
        return True, event.content, ""
    code = event.metadata.fields["code"].string_value
    return False, event.content, code
