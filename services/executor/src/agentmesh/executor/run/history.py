"""An agent's context window from the session (DESIGN §5): its own recent inputs and answers,
a bounded window read newest first, never the whole session.

A run reads it after recording its input, so the page holds one more event than the window:
the input, left out. A delegated run asks for it in the same call that records its input
(`listing`, AppendEventsRequest.list_after_append: one round trip less per delegation
level); any other run reads it with ListEvents (`read_history`), after its turn began — a
message queued behind its session's runs must see their answers."""

from __future__ import annotations

from collections.abc import Iterable

from agentmesh.executor.durability import client_context
from agentmesh.executor.durability.recorder import EventType
from agentmesh.executor.loops import client_tools
from agentmesh.executor.providers.base import Message
from agentmesh.executor.run import answer_format
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.runtime.errors import NotFound

_SENT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
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
    out). An input that came with a client's conversation (a session started by a client that
    keeps none) brings that conversation along: it is the session's beginning."""
    events = [event for event in reversed(page.events) if event.run_id != exclude_run_id]
    found: list[Message] = []
    for event in events[-window:]:
        found += sent_context(client_context.recorded(event.metadata))
        found.append(Message(role=_HISTORY_ROLES[event.event_type], content=event.content))  # type: ignore[arg-type]
    return found


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


def sent_context(context: Iterable[executor_service_pb2.ContextMessage]) -> list[Message]:
    """The conversation a client that keeps no session sent with its input, as the model's
    messages (a role the model does not take is read as the user's)."""
    return [
        Message(role=_SENT_ROLES.get(message.role, "user"), content=message.content)  # type: ignore[arg-type]
        for message in context
    ]


def request_context(
    request: executor_service_pb2.RunRequest, *, function_calling: bool, native_tool_choice: bool
) -> list[Message]:
    """What a request itself puts before the history: the format its answer must have
    (answer_format.py), what the model must know of the client's tools (loops/client_tools.py),
    and the conversation a client that keeps no session sent with it."""
    return (
        answer_format.instruction(request.response_format)
        + client_tools.instruction(
            request, function_calling=function_calling, native_tool_choice=native_tool_choice
        )
        + sent_context(request.context)
    )
