"""Fencing after a takeover (docs/durability.md): once the note of a run's next incarnation
(`<run_id>:resumed:<n+1>`, recorded by the executor that took the run over) is stored, an event of
incarnation n of that run (its `resume` metadata, 0 when absent) is refused — FAILED_PRECONDITION,
RUN_TAKEN_OVER, naming the run and the note — and nothing is written: the executor that lost the
run can record nothing more of it, its end included. A retry of an event stored before, a
delegation's response, the newer incarnation and other runs are not fenced. The check and the write
are one atomic unit: an event racing the note lands before it or is refused. On SQLite and
PostgreSQL, over a real server."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import AlreadyExists, FailedPrecondition
from tests.integration.memory.builders import EventType, delegation_response, new_event, refusals


async def _keys(memory: MemoryClient, session_id: str) -> list[str]:
    request = pb.ListEventsRequest(session_id=session_id, page_size=1000)
    return [e.idempotency_key async for e in memory.iter_events(request)]


def _event(run_id: str, key: str, *, resume: int | None = None, **fields: object) -> pb.NewEvent:
    return new_event(
        "a step",
        event_type=fields.pop("event_type", EventType.EVENT_TYPE_TOOL_CALL),  # type: ignore[arg-type]
        run_id=run_id,
        idempotency_key=f"{run_id}:{key}",
        metadata=None if resume is None else {"resume": resume},
        **fields,  # type: ignore[arg-type]
    )


def _note(run_id: str, resume: int, executor: str = "e2") -> pb.NewEvent:
    return new_event(
        f"the run resumed on executor {executor}",
        event_type=EventType.EVENT_TYPE_ERROR,
        run_id=run_id,
        idempotency_key=f"{run_id}:resumed:{resume}",
        metadata={"reason": "RUN_RESUMED", "resume": resume, "executor_id": executor},
    )


def _end(run_id: str, *, resume: int | None = None) -> pb.NewEvent:
    return _event(run_id, "end", resume=resume, event_type=EventType.EVENT_TYPE_AGENT_RESPONSE)


async def test_the_lost_incarnation_can_record_nothing_once_the_taker_noted_its_resume(
    memory: MemoryClient,
) -> None:
    await memory.append_events("s", "p", [new_event("go", run_id="r1", idempotency_key="r1:in")])
    await memory.append_events("s", "p", [_event("r1", "1")])
    await memory.append_events("s", "p", [_note("r1", 1)])

    for late in (_event("r1", "2"), _event("r1", "3", resume=0), _end("r1")):
        with pytest.raises(FailedPrecondition) as refused:
            await memory.append_events("s", "p", [late])
        assert refused.value.reason == "RUN_TAKEN_OVER"
        assert "run 'r1' was taken over by another executor (resume 1" in str(refused.value)
        assert refused.value.metadata["run_id"] == "r1"
        assert refused.value.metadata["resume"] == "1"
    # A batch holding one fenced event is refused whole.
    with pytest.raises(FailedPrecondition):
        await memory.append_events("s", "p", [_event("r2", "1"), _event("r1", "4")])

    # The taker's incarnation goes on and ends the run; then a third incarnation fences it too.
    await memory.append_events("s", "p", [_event("r1", "resume1:1", resume=1)])
    await memory.append_events("s", "p", [_note("r1", 2, executor="e3")])
    with pytest.raises(FailedPrecondition) as refused:
        await memory.append_events("s", "p", [_event("r1", "resume1:2", resume=1)])
    assert refused.value.reason == "RUN_TAKEN_OVER"
    assert refused.value.metadata["resume"] == "2"
    await memory.append_events("s", "p", [_end("r1", resume=2)])
    assert await _keys(memory, "s") == [
        "r1:in",
        "r1:1",
        "r1:resumed:1",
        "r1:resume1:1",
        "r1:resumed:2",
        "r1:end",
    ]

    # Once ended, the run's end is what a late event is told of, whichever incarnation sent it.
    with pytest.raises(FailedPrecondition) as refused:
        await memory.append_events("s", "p", [_event("r1", "resume2:9", resume=2)])
    assert refused.value.reason == "RUN_ENDED"


async def test_the_lost_incarnations_end_after_the_takers_is_told_the_run_was_taken_over(
    memory: MemoryClient,
) -> None:
    """The end key holds the taker's end: the lost incarnation's own end is refused for the
    takeover (which tells its executor to stop without an end), not for the key (which it would
    take for "the first end stands" and report a failure of a run that succeeded)."""
    await memory.append_events("s", "p", [new_event("go", run_id="r1", idempotency_key="r1:in")])
    await memory.append_events("s", "p", [_note("r1", 1)])
    taker_end = _end("r1", resume=1)
    await memory.append_events("s", "p", [taker_end])

    lost_end = _event("r1", "end", event_type=EventType.EVENT_TYPE_ERROR)
    with pytest.raises(FailedPrecondition) as refused:
        await memory.append_events("s", "p", [lost_end])
    assert refused.value.reason == "RUN_TAKEN_OVER"
    assert refused.value.metadata["run_id"] == "r1"
    assert refused.value.metadata["resume"] == "1"
    # The taker's end again is a retry; a different end of the taker's incarnation is the key's.
    assert [e.seq for e in (await memory.append_events("s", "p", [taker_end])).events] == [3]
    with pytest.raises(AlreadyExists) as reused:
        await memory.append_events(
            "s", "p", [_event("r1", "end", resume=1, event_type=EventType.EVENT_TYPE_ERROR)]
        )
    assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert await _keys(memory, "s") == ["r1:in", "r1:resumed:1", "r1:end"]


async def test_retries_responses_other_runs_and_the_notes_key_are_as_before(memory: MemoryClient) -> None:
    await memory.append_events("s", "p", [new_event("go", run_id="r1", idempotency_key="r1:in")])
    await memory.append_events("s", "p", [_event("r1", "1")])
    await memory.append_events("s", "p", [_note("r1", 1)])

    # A retry of an event stored before the note is answered with the stored event.
    retried = await memory.append_events("s", "p", [_event("r1", "1")])
    assert [event.seq for event in retried.events] == [2]
    # A delegation's response of the lost incarnation still lands: each request keeps its one.
    await memory.append_events("s", "p", [delegation_response("r1", "d1")])
    # A second taker of the same resume is refused by the note's key: one taker per incarnation.
    with pytest.raises(AlreadyExists):
        await memory.append_events("s", "p", [_note("r1", 1, executor="e3")])
    # The note again from its taker is a retry.
    assert [e.seq for e in (await memory.append_events("s", "p", [_note("r1", 1)])).events] == [3]
    # Other runs, events with no run, and metadata that names no incarnation go on.
    odd = _event("r2", "1")
    odd.metadata.update({"resume": "one"})
    await memory.append_events("s", "p", [odd, new_event("no run")])
    assert await _keys(memory, "s") == ["r1:in", "r1:1", "r1:resumed:1", "d1:response", "r2:1", ""]


async def test_a_run_started_by_the_lost_incarnation_is_refused_its_input(memory: MemoryClient) -> None:
    """A delegated or sub-agent run's input names its caller's run and incarnation: once the caller
    was taken over, a run its lost incarnation starts cannot record its input, so it never runs."""
    await memory.append_events("s", "p", [new_event("go", run_id="wf", idempotency_key="wf:in")])
    started = new_event(
        "step one", run_id="child-1", idempotency_key="child-1:1", metadata={"caller_run_id": "wf"}
    )
    await memory.append_events("s", "p", [started])
    await memory.append_events("s", "p", [_note("wf", 1)])

    late = new_event(
        "step two", run_id="child-2", idempotency_key="child-2:1", metadata={"caller_run_id": "wf"}
    )
    with pytest.raises(FailedPrecondition) as refused:
        await memory.append_events("s", "p", [late])
    assert refused.value.reason == "RUN_TAKEN_OVER"
    assert refused.value.metadata["run_id"] == "wf"
    assert "the input of run 'child-2' it started before that" in str(refused.value)
    # A run started before the takeover goes on (it outlives its caller); the taker's own child
    # names the caller's new incarnation.
    await memory.append_events("s", "p", [_event("child-1", "2")])
    mine = new_event(
        "step two",
        run_id="child-3",
        idempotency_key="child-3:1",
        metadata={"caller_run_id": "wf", "caller_resume": 1},
    )
    await memory.append_events("s", "p", [mine])
    assert await _keys(memory, "s") == ["wf:in", "child-1:1", "wf:resumed:1", "child-1:2", "child-3:1"]


RACE_SESSIONS = 6
RACE_ROUNDS = 10
RACE_STEPS = 3


async def test_an_event_racing_the_takeover_note_lands_before_it_or_is_refused(memory: MemoryClient) -> None:
    """Each round, in several sessions at once (so PostgreSQL groups their appends), the taker's
    note and three events of the lost incarnation (an end among them) are appended concurrently.
    Every one is then before the note in the log or was refused RUN_TAKEN_OVER — never after it.
    When the end lands first, the run has ended: the note is refused RUN_ENDED (the taker then
    leaves the run alone, resumption.py `_noted`) and the other events are before the end or
    refused RUN_ENDED."""
    refused = 0
    ended_first: set[str] = set()

    async def race(session_id: str, run_id: str) -> None:
        nonlocal refused
        await memory.append_events(
            session_id, "p", [new_event("go", run_id=run_id, idempotency_key=f"{run_id}:in")]
        )
        late = [_event(run_id, str(n)) for n in range(RACE_STEPS - 1)] + [_end(run_id)]
        outcomes = await asyncio.gather(
            memory.append_events(session_id, "p", [_note(run_id, 1)]),
            *(memory.append_events(session_id, "p", [event]) for event in late),
            return_exceptions=True,
        )
        if isinstance(outcomes[0], FailedPrecondition) and outcomes[0].reason == "RUN_ENDED":
            ended_first.add(f"{session_id}/{run_id}")
            refused += refusals(outcomes[1:], "RUN_ENDED")
        else:
            assert not isinstance(outcomes[0], BaseException), outcomes[0]
            refused += refusals(outcomes[1:], "RUN_TAKEN_OVER")

    for round_ in range(RACE_ROUNDS):
        await asyncio.gather(*(race(f"s{session}", f"r{round_}") for session in range(RACE_SESSIONS)))

    logged = 0
    for session in range(RACE_SESSIONS):
        keys = await _keys(memory, f"s{session}")
        for round_ in range(RACE_ROUNDS):
            run_id = f"r{round_}"
            mine = [key for key in keys if key.startswith(f"{run_id}:")]
            if f"s{session}/{run_id}" in ended_first:
                assert f"{run_id}:resumed:1" not in mine and mine[-1] == f"{run_id}:end", mine
                logged += len(mine) - 1  # all but the input
                continue
            note = mine.index(f"{run_id}:resumed:1")
            assert all(key.endswith(":in") or i < note for i, key in enumerate(mine) if i != note), (
                f"an event of {run_id} landed after its takeover note in session s{session}: {mine}"
            )
            logged += len(mine) - 2  # all but the input and the note
    # Every late event is accounted for: stored before the note, or refused.
    assert logged + refused == RACE_SESSIONS * RACE_ROUNDS * RACE_STEPS
