"""A run's input as its session records it: a user's message, or a delegated task received, with
what a resumed run needs to go on in its metadata. A delegated LLM run reads its history
window in the same call (history.py: one round trip less per delegation level)."""

from __future__ import annotations

from typing import Any

from agentmesh.executor.durability import client_context
from agentmesh.executor.durability.recorder import EventType, NewEvent, Recorder
from agentmesh.executor.providers.factory import recorded_settings
from agentmesh.executor.run import history
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_resources_pb2
from agentmesh.runtime.errors import DomainError, QuotaExceeded


class InputRefused(Exception):
    """Memory refused the run's input for its project's limits (`stored_bytes`): nothing of the
    run is stored, so it ends as a refusal before its loop would (its caller gets `error`'s
    status, and nothing is recorded), not as a run that failed."""

    def __init__(self, error: DomainError) -> None:
        super().__init__(error.message)
        self.error = error


async def record_input(
    request: executor_service_pb2.RunRequest, recorder: Recorder, *, history_window: int
) -> tuple[memory_resources_pb2.Event, memory_service_pb2.ListEventsResponse | None]:
    """Records the run's input: its event, and the page of the agent's history window read with
    it when `history_window` asks for one (None otherwise)."""
    received = NewEvent(
        EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED
        if request.delegation_id
        else EventType.EVENT_TYPE_USER_MESSAGE,
        request.input,
        parent_event_id=request.parent_event_id,
        metadata=_input_metadata(request),
    )
    try:
        if not history_window:
            (event,) = await recorder.record_many([received])
            return event, None
        window = history.listing(
            session_id=recorder.session_id,
            project_id=recorder.project_id,
            agent=recorder.agent,
            window=history_window,
        )
        return await recorder.record_then_list(received, window)
    except DomainError as error:
        if error.reason == QuotaExceeded.default_reason:
            raise InputRefused(error) from error
        raise


def _input_metadata(request: executor_service_pb2.RunRequest) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if request.delegation_path:
        metadata["delegation_path"] = list(request.delegation_path)
        metadata["depth"] = request.delegation_depth
    if request.as_sub_agent:
        metadata["as_sub_agent"] = True
    if request.tree_start_seq:
        metadata["tree_start_seq"] = request.tree_start_seq  # for a resumed run (resumed_request)
    if settings := recorded_settings(request.model_settings):
        metadata["model_settings"] = settings  # for a resumed run (resumption.resumed_request)
    if request.context:  # a stateless client's conversation, for a resumed run
        metadata[client_context.CONTEXT_KEY] = client_context.recordable(request.context)
    if request.response_format.type:  # the answer's shape, which a resumed run is held to
        metadata[client_context.FORMAT_KEY] = client_context.recordable_format(request.response_format)
    metadata.update(client_context.recordable_tools(request))  # offered again to a resumed run
    if request.sub_agent_id:
        metadata["sub_agent_id"] = request.sub_agent_id  # how a resumed workflow finds this run
    if request.caller_run_id:
        # The input is refused once the caller was taken over since (memory `fence.py`).
        metadata["caller_run_id"] = request.caller_run_id
        if request.caller_resume:
            metadata["caller_resume"] = request.caller_resume
    return metadata
