"""An agent's context window from the session (DESIGN §5): its own recent inputs and answers,
a bounded window read newest first, never the whole session.

A run reads it after recording its input, so the page holds one more event than the window:
the input, left out. A delegated run asks for it in the same call that records its input
(`listing`, AppendEventsRequest.list_after_append: one round trip less per delegation
level); any other run reads it with ListEvents (`read_history`), after its turn began — a
message queued behind its session's runs must see their answers."""

from __future__ import annotations

from agentmesh.executor.durability.recorder import EventType
from agentmesh.executor.providers.base import Message
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.runtime.errors import NotFound

_HISTORY_ROLES = {
    EventType.EVENT_TYPE_USER_MESSAGE: "user",
    EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED: "user",
    EventType.EVENT_TYPE_AGENT_RESPONSE: "assistant",
}


def listing(
    *, session_id: str, project_id: str, agent: str, window: int
) -> memory_service_pb2.ListEventsRequest:
    """The ListEvents that reads `agent`'s window in the session (`project_id`: a session id is
    unique only within its project)."""
    return memory_service_pb2.ListEventsRequest(
        session_id=session_id,
        project_id=project_id,
        agent=agent,
        event_types=list(_HISTORY_ROLES),
        page_size=window + 1,
        descending=True,
        from_context_start=True,  # a reset session starts afresh (ResetSession)
    )


def messages(
    page: memory_service_pb2.ListEventsResponse, *, window: int, exclude_run_id: str
) -> list[Message]:
    """The window's messages, oldest first, from a `listing`'s page (this run's own input left
    out)."""
    found = [
        Message(role=_HISTORY_ROLES[event.event_type], content=event.content)  # type: ignore[arg-type]
        for event in reversed(page.events)
        if event.run_id != exclude_run_id
    ]
    return found[-window:]


async def read_history(
    memory: MemoryClient, *, session_id: str, project_id: str, agent: str, window: int, exclude_run_id: str
) -> list[Message]:
    """The agent's window, read with ListEvents (see the module's docstring)."""
    request = listing(session_id=session_id, project_id=project_id, agent=agent, window=window)
    try:
        page = await memory.list_events(request)
    except NotFound:  # a new session has no history yet
        return []
    return messages(page, window=window, exclude_run_id=exclude_run_id)
