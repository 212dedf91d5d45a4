"""A run taken over while it answered: another executor took it (its note of the run's next
incarnation stored) and ended it first. The answer of the executor that lost the run then finds
the run's end key holding the taker's end: the memory service refuses it as taken over (memory
`fence.py`), so the run stops here without an end and tells its caller RUN_TAKEN_OVER — to follow
the log to the taker's answer — never a `run_failed` of a run its taker completed. The test plays
the taker: it writes the note and the end as the taker's executor would."""

from __future__ import annotations

import pytest

from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.runtime.errors import Unavailable
from tests.integration.executor.support import EventType, Stack, event_type, kind
from tests.integration.memory.builders import new_event

pytestmark = pytest.mark.asyncio(loop_scope="module")

# Two chunks (the mock cuts about 64 characters), a pause before each: the test writes the taker's
# events in the pause after the first.
SLOW_ANSWER = {"content": f"{'first ' * 10}{'second ' * 8}".strip(), "delay_seconds": 3.0}


async def test_a_run_whose_taker_ended_it_first_stops_without_an_end(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "answerer", mock_responses=[SLOW_ANSWER])
    request = stack.run_request(agent, "go")
    seen = []
    with pytest.raises(Unavailable) as stopped:
        async for event in stack.executor.run(request, metadata=stack.metadata):
            seen.append(event)
            if kind(event) == "text_delta" and len([e for e in seen if kind(e) == "text_delta"]) == 1:
                await _take_over_and_end(stack, project.id, request.session_id, event.run_id)

    assert stopped.value.reason == "RUN_TAKEN_OVER"
    assert not [e for e in seen if kind(e) in ("run_failed", "run_completed")], seen
    stored = await stack.events(request.session_id)
    ends = [e for e in stored if e.idempotency_key.endswith(":end")]
    assert [(event_type(e), e.content, e.metadata["resume"]) for e in ends] == [
        ("agent_response", "the taker's answer", 1)
    ]


async def _take_over_and_end(stack: Stack, project_id: str, session_id: str, run_id: str) -> None:
    note = new_event(
        "the run resumed on executor taker",
        agent="answerer",
        event_type=EventType.EVENT_TYPE_ERROR,
        run_id=run_id,
        idempotency_key=f"{run_id}:resumed:1",
        metadata={"reason": "RUN_RESUMED", "resume": 1, "executor_id": "taker"},
    )
    end = new_event(
        "the taker's answer",
        agent="answerer",
        event_type=EventType.EVENT_TYPE_AGENT_RESPONSE,
        run_id=run_id,
        idempotency_key=f"{run_id}:end",
        metadata={"resume": 1},
    )
    request = memory_service_pb2.AppendEventsRequest(
        session_id=session_id, project_id=project_id, events=[note, end]
    )
    await stack.memory.AppendEvents(request, metadata=stack.metadata)
