"""Fencing (docs/durability.md): once a run's final event (`<run_id>:end`) is stored, a step of
that run is refused (FAILED_PRECONDITION, RUN_ENDED, naming the run and its end) and nothing is
written — what an executor cut off past its lease would otherwise record after the run was closed.
A retry of a step stored before the end, a delegation's response, and other runs are not fenced.
The check and the write are one atomic unit: a step racing its run's end lands before it or is
refused, never after it (also inside PostgreSQL's group commit). On SQLite and PostgreSQL, over a
real server."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import AlreadyExists, FailedPrecondition
from tests.integration.memory.builders import EventType, delegation_response, new_event, refusals


async def _log(memory: MemoryClient, session_id: str) -> list[tuple[int, str, str]]:
    request = pb.ListEventsRequest(session_id=session_id, page_size=1000)
    return [(e.seq, e.run_id, e.idempotency_key) async for e in memory.iter_events(request)]


def _step(run_id: str, n: int) -> pb.NewEvent:
    return new_event(
        "a step", event_type=EventType.EVENT_TYPE_TOOL_CALL, run_id=run_id, idempotency_key=f"{run_id}:{n}"
    )


def _end(run_id: str, content: str = "the answer") -> pb.NewEvent:
    return new_event(
        content,
        event_type=EventType.EVENT_TYPE_AGENT_RESPONSE,
        run_id=run_id,
        idempotency_key=f"{run_id}:end",
    )


async def test_a_step_of_an_ended_run_is_refused_and_nothing_is_written(memory: MemoryClient) -> None:
    await memory.append_events(
        "s", "p", [new_event("go", run_id="r1", idempotency_key="r1:1"), _step("r1", 2)]
    )
    await memory.append_events("s", "p", [_end("r1")])

    with pytest.raises(FailedPrecondition) as refused:
        await memory.append_events("s", "p", [_step("r1", 3)])
    assert refused.value.reason == "RUN_ENDED"
    assert "run 'r1' has ended" in str(refused.value)
    assert refused.value.metadata["run_id"] == "r1"

    # A batch holding one fenced step is refused whole.
    with pytest.raises(FailedPrecondition):
        await memory.append_events("s", "p", [new_event("other", run_id="r2"), _step("r1", 4)])
    assert await _log(memory, "s") == [(1, "r1", "r1:1"), (2, "r1", "r1:2"), (3, "r1", "r1:end")]


async def test_retries_responses_and_other_runs_are_not_fenced(memory: MemoryClient) -> None:
    await memory.append_events(
        "s", "p", [new_event("go", run_id="r1", idempotency_key="r1:1"), _step("r1", 2)]
    )
    await memory.append_events("s", "p", [_end("r1")])

    # A retry of a step stored before the end is answered with the stored event.
    retried = await memory.append_events("s", "p", [_step("r1", 2)])
    assert [event.seq for event in retried.events] == [2]
    # The end again: the first stands (a different end is refused by its key, not the fence).
    assert [e.seq for e in (await memory.append_events("s", "p", [_end("r1")])).events] == [3]
    with pytest.raises(AlreadyExists):
        await memory.append_events("s", "p", [_end("r1", "another answer")])
    # A delegation's one response still lands after the run's end.
    await memory.append_events("s", "p", [delegation_response("r1", "d1")])
    # Another run of the session, and events with no run, go on.
    await memory.append_events("s", "p", [_step("r2", 1), new_event("no run")])
    assert [key for _, _, key in await _log(memory, "s")] == [
        "r1:1",
        "r1:2",
        "r1:end",
        "d1:response",
        "r2:1",
        "",
    ]


RACE_SESSIONS = 6
RACE_ROUNDS = 15
RACE_STEPS = 3


async def test_a_step_racing_its_runs_end_lands_before_it_or_is_refused(memory: MemoryClient) -> None:
    """Each round, in several sessions at once (so PostgreSQL groups their appends), a run's end
    and three of its steps are appended concurrently. Every step is then either before the end in
    the log or was refused RUN_ENDED — never after it."""
    refused = 0

    async def race(session_id: str, run_id: str) -> None:
        nonlocal refused
        start = new_event("go", run_id=run_id, idempotency_key=f"{run_id}:in")
        await memory.append_events(session_id, "p", [start])
        outcomes = await asyncio.gather(
            memory.append_events(session_id, "p", [_end(run_id)]),
            *(memory.append_events(session_id, "p", [_step(run_id, n)]) for n in range(RACE_STEPS)),
            return_exceptions=True,
        )
        refused += refusals(outcomes, "RUN_ENDED")

    for round_ in range(RACE_ROUNDS):
        await asyncio.gather(*(race(f"s{session}", f"r{round_}") for session in range(RACE_SESSIONS)))

    logged_steps = 0
    for session in range(RACE_SESSIONS):
        log = await _log(memory, f"s{session}")
        assert [seq for seq, _, _ in log] == list(range(1, len(log) + 1))
        ends = {run_id: seq for seq, run_id, key in log if key == f"{run_id}:end"}
        assert len(ends) == RACE_ROUNDS
        for seq, run_id, key in log:
            assert seq <= ends[run_id], f"{key} landed after its run's end in session s{session}"
        logged_steps += sum(1 for _, run_id, key in log if key not in (f"{run_id}:in", f"{run_id}:end"))
    # Every step is accounted for: stored before its end, or refused.
    assert logged_steps + refused == RACE_SESSIONS * RACE_ROUNDS * RACE_STEPS
