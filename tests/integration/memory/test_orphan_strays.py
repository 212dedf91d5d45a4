"""A taken-over run's strays (executor `leases.OrphanCloser`): the executor that
lost a run's lease goes on with it until its next renewal tells it so, and may record a
`delegation_request` after its taker read the run's log. The taker answers every request of the
run once the run's end is stored — the fence makes the log complete from then on — so each
request still gets exactly one response. Over a real memory server, SQLite and PostgreSQL."""

from __future__ import annotations

import json

import grpc

from agentmesh.executor.durability.leases import OrphanCloser
from agentmesh.executor.durability.resumption import RunResumer
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as registry_pb
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.memory.v1 import resources_pb2
from agentmesh.registry.client import RegistryClient
from tests.integration.memory.builders import EventType, new_event

ORPHAN = registry_pb.OrphanedRun(
    agent_id="a-1", run_id="r1", session_id="s", project_id="p", agent_name="coordinator"
)


def _request(delegation_id: str) -> pb.NewEvent:
    return new_event(
        json.dumps({"agent": "worker", "task": "look it up"}),
        agent="coordinator",
        event_type=EventType.EVENT_TYPE_DELEGATION_REQUEST,
        run_id="r1",
        delegation_id=delegation_id,
        idempotency_key=f"r1:{delegation_id}",
    )


async def _log(memory: MemoryClient) -> list[resources_pb2.Event]:
    request = pb.ListEventsRequest(session_id="s", project_id="p", page_size=1000)
    return [event async for event in memory.iter_events(request)]


async def test_a_request_recorded_after_the_taker_read_the_log_is_answered_once(
    memory: MemoryClient,
) -> None:
    closer = OrphanCloser(memory, system_metadata=lambda: None)
    await memory.append_events("s", "p", [new_event("go", agent="coordinator", run_id="r1")])
    await memory.append_events("s", "p", [_request("d-seen")])
    read_by_taker = await _log(memory)
    # The executor that lost the run records one more request after the taker's read.
    await memory.append_events("s", "p", [_request("d-stray")])

    await closer.close(ORPHAN, events=read_by_taker)
    await closer.close(ORPHAN, events=read_by_taker)  # handed out again: nothing twice

    events = await _log(memory)
    responses = [e for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE]
    assert sorted(e.delegation_id for e in responses) == ["d-seen", "d-stray"]
    assert all(json.loads(e.content)["outcome"] == "failed" for e in responses)
    [end] = [e for e in events if e.idempotency_key == "r1:end"]
    assert end.metadata["reason"] == "EXECUTOR_LOST"
    # The stray's response comes after the end: the fence closed the run's log first.
    stray = next(e for e in responses if e.delegation_id == "d-stray")
    assert stray.seq > end.seq


async def test_strays_wait_for_the_runs_end_to_be_stored(memory: MemoryClient) -> None:
    """No end in the log (a resumed run's end still kept in its executor's outbox): the run may
    still record requests and answer them itself, so nothing is answered for it."""
    closer = OrphanCloser(memory, system_metadata=lambda: None)
    await memory.append_events("s", "p", [new_event("go", agent="coordinator", run_id="r1"), _request("d-1")])

    await closer.answer_strays(ORPHAN, message="taken over")

    assert [e.event_type for e in await _log(memory)] == [
        EventType.EVENT_TYPE_USER_MESSAGE,
        EventType.EVENT_TYPE_DELEGATION_REQUEST,
    ]


async def test_a_run_handed_out_again_after_its_end_gets_its_strays_answered(memory: MemoryClient) -> None:
    """The orphan comes back to a taker once more with its end stored already (its first taker
    could not report it closed: memory was away as it answered the strays). The taker resumes
    nothing and answers what is still open."""
    await memory.append_events("s", "p", [new_event("go", agent="coordinator", run_id="r1"), _request("d-1")])
    end = new_event(
        "the run failed",
        agent="coordinator",
        event_type=EventType.EVENT_TYPE_ERROR,
        run_id="r1",
        idempotency_key="r1:end",
        metadata={"code": "UNAVAILABLE"},
    )
    await memory.append_events("s", "p", [end])
    nowhere = grpc.aio.insecure_channel("127.0.0.1:1")  # an ended run needs no registry: never called

    async def never(*_args: object) -> None:
        raise AssertionError("an ended run is not resumed")

    async def not_counted(*_args: object) -> bool:
        raise AssertionError("an ended run is not counted in")

    try:
        resumer = RunResumer(
            memory,
            RegistryClient(nowhere),
            OrphanCloser(memory, system_metadata=lambda: None),
            resume=never,
            count_in=not_counted,
            system_metadata=lambda: None,
            max_resumes=3,
            executor_id="e2",
        )
        await resumer.close(ORPHAN)
    finally:
        await nowhere.close()

    events = await _log(memory)
    [response] = [e for e in events if e.event_type == EventType.EVENT_TYPE_DELEGATION_RESPONSE]
    assert response.delegation_id == "d-1" and json.loads(response.content)["outcome"] == "failed"
