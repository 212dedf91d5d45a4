"""Erasing a run's turn (`EraseRun`, how a deleted OpenAI response goes) over a real server, on
SQLite and PostgreSQL: a session that is the run's turn alone — its input, its steps and what the
runs it delegated to recorded — is emptied and stays, its seq going on; a session holding another
run's turn, or a run with no turn there, is refused with nothing erased; only the mesh's own
services may ask."""

from __future__ import annotations

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import FailedPrecondition, NotFound, PermissionDenied
from agentmesh.runtime.identity import Principal, TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel
from tests.integration.memory.builders import EventType, new_event
from tests.mesh import JWT_SECRET


def _turn(run_id: str, worker_run_id: str) -> list[pb.NewEvent]:
    """A run's turn: its input, a delegation (whose run records no user message) and its answer."""
    return [
        new_event("what is the answer?", run_id=run_id),
        new_event("ask the worker", event_type=EventType.EVENT_TYPE_DELEGATION_REQUEST, run_id=run_id),
        new_event("task", event_type=EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED, run_id=worker_run_id),
        new_event("42", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE, run_id=worker_run_id),
        new_event("42", event_type=EventType.EVENT_TYPE_AGENT_RESPONSE, run_id=run_id),
    ]


async def _contents(memory: MemoryClient, session_id: str, project_id: str) -> list[str]:
    listing = pb.ListEventsRequest(session_id=session_id, project_id=project_id)
    return [event.content async for event in memory.iter_events(listing)]


async def test_a_runs_turn_alone_is_erased_and_its_session_goes_on(memory: MemoryClient) -> None:
    await memory.append_events("s-only", "p-1", _turn("r-1", "w-1"))
    await memory.append_events("s-kept", "p-1", [new_event("elsewhere", run_id="r-1")])

    assert await memory.erase_run("s-only", "p-1", "r-1") == 5

    assert await _contents(memory, "s-only", "p-1") == []
    session = await memory.get_session("s-only", project_id="p-1")
    assert (session.first_seq, session.last_seq) == (6, 5)
    # The session goes on after what was erased; other sessions keep theirs.
    await memory.append_events("s-only", "p-1", [new_event("later", run_id="r-2")])
    assert await _contents(memory, "s-only", "p-1") == ["later"]
    assert (await memory.get_session("s-only", project_id="p-1")).last_seq == 6
    assert await _contents(memory, "s-kept", "p-1") == ["elsewhere"]
    # Erased, the run has no turn there any more.
    with pytest.raises(NotFound) as gone:
        await memory.erase_run("s-only", "p-1", "r-1")
    assert gone.value.reason == "RUN_NOT_IN_SESSION"


async def test_a_session_of_other_turns_too_is_not_erased(memory: MemoryClient) -> None:
    await memory.append_events("s-chat", "p-1", _turn("r-1", "w-1"))
    await memory.append_events("s-chat", "p-1", _turn("r-2", "w-2"))
    for run_id in ("r-1", "r-2"):
        with pytest.raises(FailedPrecondition) as refused:
            await memory.erase_run("s-chat", "p-1", run_id)
        assert refused.value.reason == "SESSION_SHARED"
    assert len(await _contents(memory, "s-chat", "p-1")) == 10
    # A run of no turn there, a session of another project, and no session at all: not found.
    for session_id, project_id, run_id in (
        ("s-chat", "p-1", "w-1"),
        ("s-chat", "p-2", "r-1"),
        ("s-no", "p-1", "r"),
    ):
        with pytest.raises(NotFound):
            await memory.erase_run(session_id, project_id, run_id)


async def test_only_the_mesh_may_erase_a_run(memory_service: RunningService) -> None:
    user = TokenCodec(JWT_SECRET).issue(Principal(user_id="u-1", email="u@example.com"))
    channel = authorized_channel(memory_service.address, user)
    try:
        as_user = MemoryClient(channel)
        await as_user.append_events("s-1", "p-1", [new_event("mine", run_id="r-1")])
        with pytest.raises(PermissionDenied):
            await as_user.erase_run("s-1", "p-1", "r-1")
        assert (await as_user.get_session("s-1", project_id="p-1")).last_seq == 1
    finally:
        await channel.close()
