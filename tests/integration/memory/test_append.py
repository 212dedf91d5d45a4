"""AppendEvents over a real server, on SQLite and PostgreSQL: atomic batches, gap-free seq under
concurrent writers, idempotency keys and optimistic concurrency."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.memory.client import MemoryClient, event_to_dict
from agentmesh.memory.v1 import memory_service_pb2 as pb
from agentmesh.runtime.errors import (
    Aborted,
    AlreadyExists,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from tests.integration.memory.builders import EventType, new_event
from tests.integration.memory.conftest import MAX_EVENT_BYTES

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"


async def all_events(memory: MemoryClient, session_id: str) -> list:
    request = pb.ListEventsRequest(session_id=session_id, page_size=1000)
    return [event async for event in memory.iter_events(request)]


async def test_append_stores_every_field_and_numbers_from_one(memory: MemoryClient) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    first = new_event(
        "what is 2+2?",
        agent="coordinator",
        metadata={"attempt": 2, "tags": ["a", "b"], "ratio": 0.5},
        run_id="run-1",
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        idempotency_key="key-1",
    )
    second = new_event(
        '{"agent": "worker", "task": "add"}',
        agent="coordinator",
        event_type=EventType.EVENT_TYPE_DELEGATION_REQUEST,
        run_id="run-1",
        delegation_id="del-1",
    )

    response = await memory.append_events("s-1", "p-1", [first, second])

    assert response.last_seq == 2
    stored = [event_to_dict(event) for event in response.events]
    assert [event["seq"] for event in stored] == [1, 2]
    assert set(stored[0]) == {
        "id",
        "session_id",
        "seq",
        "agent",
        "event_type",
        "content",
        "metadata",
        "run_id",
        "parent_event_id",
        "delegation_id",
        "trace_id",
        "span_id",
        "created_at",
        "idempotency_key",
    }
    assert stored[0] | {"id": None, "created_at": None} == {
        "id": None,
        "session_id": "s-1",
        "seq": 1,
        "agent": "coordinator",
        "event_type": "user_message",
        "content": "what is 2+2?",
        "metadata": {"attempt": 2, "tags": ["a", "b"], "ratio": 0.5},
        "run_id": "run-1",
        "parent_event_id": None,
        "delegation_id": None,
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "created_at": None,
        "idempotency_key": "key-1",
    }
    assert stored[1]["event_type"] == "delegation_request"
    assert stored[1]["delegation_id"] == "del-1"
    assert stored[0]["id"] != stored[1]["id"]
    assert before <= datetime.fromisoformat(stored[0]["created_at"]) <= datetime.now(UTC)
    # What was returned is what is read back.
    assert await all_events(memory, "s-1") == list(response.events)
    session = await memory.get_session("s-1")
    assert (session.project_id, session.agent, session.first_seq, session.last_seq) == (
        "p-1",
        "coordinator",
        1,
        2,
    )


async def test_receipts_only_answers_ids_and_seqs_without_the_content(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("before")])
    events = [
        new_event("first", metadata={"tool": "search"}, idempotency_key="r-1"),
        new_event("second", run_id="run-1"),
    ]

    response = await memory.append_events("s-1", "p-1", events, receipts_only=True)

    assert response.last_seq == 3
    stored = await all_events(memory, "s-1")
    for receipt, event in zip(response.events, stored[1:], strict=True):
        assert (receipt.id, receipt.session_id, receipt.seq) == (event.id, "s-1", event.seq)
        assert receipt.created_at == event.created_at
        assert (receipt.content, receipt.agent, receipt.run_id, receipt.idempotency_key) == ("", "", "", "")
        assert not receipt.HasField("metadata")
    assert [event.content for event in stored] == ["before", "first", "second"]
    # A retry with receipts gets the receipts of the events stored the first time.
    retry = await memory.append_events("s-1", "p-1", events[:1], receipts_only=True)
    assert (retry.events[0].id, retry.events[0].seq) == (stored[1].id, 2)


async def test_ten_concurrent_writers_get_seq_1_to_1000_without_gaps(memory: MemoryClient) -> None:
    async def writer(name: str) -> list[int]:
        seqs = []
        for index in range(100):
            response = await memory.append_events("busy", "p-1", [new_event(f"{name}-{index}", agent=name)])
            seqs.append(response.events[0].seq)
        return seqs

    results = await asyncio.gather(*(writer(f"writer-{n}") for n in range(10)))

    assigned = sorted(seq for seqs in results for seq in seqs)
    assert assigned == list(range(1, 1001))
    for seqs in results:  # each writer saw its own appends in order
        assert seqs == sorted(seqs)
    stored = await all_events(memory, "busy")
    assert [event.seq for event in stored] == list(range(1, 1001))
    assert len({event.id for event in stored}) == 1000
    assert sorted(event.content for event in stored) == sorted(
        f"writer-{n}-{i}" for n in range(10) for i in range(100)
    )
    assert (await memory.get_session("busy")).last_seq == 1000


async def test_a_thousand_expected_last_seq_races_each_have_exactly_one_winner(memory: MemoryClient) -> None:
    # Ten sessions side by side, a hundred races each: two writers append at the same last seq.
    async def attempt(session_id: str, writer: str, expected: int) -> int | None:
        try:
            response = await memory.append_events(
                session_id, "p-1", [new_event(writer, agent=writer)], expected_last_seq=expected
            )
        except Aborted as error:
            assert error.reason == "EXPECTED_LAST_SEQ_MISMATCH"
            assert error.metadata["last_seq"] == str(expected + 1)
            return None
        return response.events[0].seq

    async def races(session_id: str) -> None:
        for last_seq in range(100):
            outcomes = await asyncio.gather(
                attempt(session_id, "a", last_seq), attempt(session_id, "b", last_seq)
            )
            assert sorted(outcomes, key=lambda seq: seq or 0) == [None, last_seq + 1]

    await asyncio.gather(*(races(f"race-{lane}") for lane in range(10)))

    for lane in range(10):
        stored = await all_events(memory, f"race-{lane}")
        assert [event.seq for event in stored] == list(range(1, 101))


async def test_a_stale_expected_last_seq_is_aborted_and_writes_nothing(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("one"), new_event("two")])

    with pytest.raises(Aborted) as caught:
        await memory.append_events("s-1", "p-1", [new_event("three"), new_event("four")], expected_last_seq=1)

    assert caught.value.reason == "EXPECTED_LAST_SEQ_MISMATCH"
    assert caught.value.metadata["last_seq"] == "2"
    assert [event.content for event in await all_events(memory, "s-1")] == ["one", "two"]
    assert (await memory.get_session("s-1")).last_seq == 2
    response = await memory.append_events("s-1", "p-1", [new_event("three")], expected_last_seq=2)
    assert response.events[0].seq == 3


async def test_expected_last_seq_zero_creates_the_session_only_once(memory: MemoryClient) -> None:
    await memory.append_events("new", "p-1", [new_event("first")], expected_last_seq=0)
    with pytest.raises(Aborted):
        await memory.append_events("new", "p-1", [new_event("also first")], expected_last_seq=0)
    assert [event.content for event in await all_events(memory, "new")] == ["first"]


async def test_a_positive_expected_last_seq_on_a_new_session_is_aborted_and_creates_nothing(
    memory: MemoryClient,
) -> None:
    with pytest.raises(Aborted) as caught:
        await memory.append_events("new", "p-1", [new_event("first")], expected_last_seq=3)

    assert caught.value.reason == "EXPECTED_LAST_SEQ_MISMATCH"
    assert caught.value.metadata["last_seq"] == "0"
    with pytest.raises(NotFound):
        await memory.get_session("new")


async def test_idempotent_retries_store_one_event_and_return_the_first(memory: MemoryClient) -> None:
    event = new_event("charge the card", idempotency_key="op-42", metadata={"amount": 10})
    first = await memory.append_events("s-1", "p-1", [event])
    retries = await asyncio.gather(*(memory.append_events("s-1", "p-1", [event]) for _ in range(10)))
    # A retry carrying a stale expected_last_seq is still answered as the first attempt was.
    late = await memory.append_events("s-1", "p-1", [event], expected_last_seq=0)

    for response in [*retries, late]:
        assert list(response.events) == list(first.events)
        assert response.last_seq == 1
    assert len(await all_events(memory, "s-1")) == 1


async def test_concurrent_first_attempts_with_one_key_store_one_event(memory: MemoryClient) -> None:
    event = new_event("once", idempotency_key="only-once")
    responses = await asyncio.gather(*(memory.append_events("s-1", "p-1", [event]) for _ in range(10)))
    assert len({response.events[0].id for response in responses}) == 1
    assert len(await all_events(memory, "s-1")) == 1


async def test_a_batch_mixing_repeated_and_new_keys_stores_only_the_new(memory: MemoryClient) -> None:
    first = await memory.append_events("s-1", "p-1", [new_event("a", idempotency_key="k-a")])
    response = await memory.append_events(
        "s-1", "p-1", [new_event("a", idempotency_key="k-a"), new_event("b", idempotency_key="k-b")]
    )
    assert response.events[0] == first.events[0]
    assert response.events[1].seq == 2
    assert [event.content for event in await all_events(memory, "s-1")] == ["a", "b"]


async def test_a_key_reused_with_other_content_is_already_exists(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("original", idempotency_key="k")])

    with pytest.raises(AlreadyExists) as caught:
        await memory.append_events("s-1", "p-1", [new_event("ok"), new_event("changed", idempotency_key="k")])

    assert caught.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert [v.field for v in caught.value.violations] == ["events[1].idempotency_key"]
    assert [event.content for event in await all_events(memory, "s-1")] == ["original"]
    # Keys are per session: another session may use the same key.
    other = await memory.append_events("s-2", "p-1", [new_event("changed", idempotency_key="k")])
    assert other.events[0].seq == 1


async def test_a_batch_with_one_oversized_event_stores_nothing(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("kept")])
    batch = [new_event("fine"), new_event("x" * (MAX_EVENT_BYTES + 1)), new_event("fine too")]

    with pytest.raises(ResourceExhausted) as caught:
        await memory.append_events("s-1", "p-1", batch)

    assert caught.value.reason == "EVENT_TOO_LARGE"
    assert [v.field for v in caught.value.violations] == ["events[1].content"]
    assert [event.content for event in await all_events(memory, "s-1")] == ["kept"]
    # A new session whose first batch fails is not created either.
    with pytest.raises(ResourceExhausted):
        await memory.append_events("s-new", "p-1", batch)
    with pytest.raises(NotFound):
        await memory.get_session("s-new")
    # The service goes on serving.
    assert (await memory.append_events("s-1", "p-1", [new_event("after")])).last_seq == 2


async def test_metadata_counts_towards_the_event_size(memory: MemoryClient) -> None:
    with pytest.raises(ResourceExhausted):
        await memory.append_events(
            "s-1", "p-1", [new_event("small", metadata={"blob": "y" * MAX_EVENT_BYTES})]
        )


async def test_too_many_events_in_one_batch_is_resource_exhausted(memory: MemoryClient) -> None:
    with pytest.raises(ResourceExhausted) as caught:
        await memory.append_events("s-1", "p-1", [new_event(str(n)) for n in range(101)])
    assert caught.value.reason == "TOO_MANY_EVENTS"


async def test_a_new_session_without_project_id_is_invalid_and_names_the_field(memory: MemoryClient) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await memory.append_events("s-1", "", [new_event()])
    assert [v.field for v in caught.value.violations] == ["project_id"]
    with pytest.raises(NotFound):
        await memory.get_session("s-1")
    # An existing session may be appended to without repeating its project.
    await memory.append_events("s-1", "p-1", [new_event()])
    assert (await memory.append_events("s-1", "", [new_event()])).last_seq == 2


async def test_two_projects_use_one_session_id_without_meeting(memory: MemoryClient) -> None:
    await memory.append_events("s-1", "p-1", [new_event("mine"), new_event("keyed", idempotency_key="k")])

    theirs = await memory.append_events("s-1", "p-2", [new_event("theirs", idempotency_key="k")])

    # Their own session from seq 1, their own idempotency keys: nothing of p-1's shows.
    assert ([e.seq for e in theirs.events], theirs.events[0].content) == ([1], "theirs")
    mine = pb.ListEventsRequest(session_id="s-1", project_id="p-1", page_size=1000)
    assert [e.content async for e in memory.iter_events(mine)] == ["mine", "keyed"]
    other = pb.ListEventsRequest(session_id="s-1", project_id="p-2", page_size=1000)
    assert [e.content async for e in memory.iter_events(other)] == ["theirs"]
    assert (await memory.get_session("s-1", project_id="p-2")).last_seq == 1
    # Without a project, an id two projects use names neither.
    with pytest.raises(NotFound):
        await memory.get_session("s-1")
    with pytest.raises(NotFound):
        await all_events(memory, "s-1")


@pytest.mark.parametrize(
    ("events", "fields"),
    [
        ([new_event(), new_event(event_type=EventType.EVENT_TYPE_UNSPECIFIED)], ["events[1].event_type"]),
        ([new_event(event_type=42)], ["events[0].event_type"]),
        ([new_event(agent="")], ["events[0].agent"]),
        ([new_event(trace_id="not-hex")], ["events[0].trace_id"]),
        ([new_event(span_id="ABCDEF0123456789")], ["events[0].span_id"]),
        (
            [new_event("a", idempotency_key="k"), new_event("b", idempotency_key="k")],
            ["events[1].idempotency_key"],
        ),
        ([], ["events"]),
        ([new_event("nul \x00 inside")], ["events[0].content"]),
        ([new_event(metadata={"k": ["nul \x00"]})], ["events[0].metadata"]),
        ([new_event(metadata={"k": float("nan")})], ["events[0].metadata"]),
    ],
    ids=[
        "unspecified-type",
        "unknown-type",
        "no-agent",
        "bad-trace",
        "bad-span",
        "repeated-key",
        "empty",
        "nul-content",
        "nul-metadata",
        "nan-metadata",
    ],
)
async def test_invalid_events_are_rejected_naming_the_field(
    memory: MemoryClient, events: list[pb.NewEvent], fields: list[str]
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await memory.append_events("s-1", "p-1", events)
    assert [v.field for v in caught.value.violations] == fields
    with pytest.raises(NotFound):
        await memory.get_session("s-1")


async def test_invalid_session_ids_are_rejected(memory: MemoryClient) -> None:
    for session_id, reason in [("", "is required"), ("x" * 256, "at most"), ("a\nb", "control")]:
        with pytest.raises(InvalidArgument) as caught:
            await memory.append_events(session_id, "p-1", [new_event()])
        assert caught.value.violations[0].field == "session_id"
        assert reason in caught.value.violations[0].description
