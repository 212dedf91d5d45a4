"""The memory rules over an in-memory store: idempotency races, live following, and retention
in bounded batches."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.memory.errors import HistoryTrimmed, ValidationFailed
from agentmesh.memory.event_store import IdempotencyKeyRace
from agentmesh.memory.in_memory_store import InMemoryEventStore
from agentmesh.memory.memory import EventLog
from agentmesh.memory.models import EventQuery, EventType, NewEvent, RetentionPolicy
from agentmesh.memory.retention import RetentionSweeper
from agentmesh.memory.watch import SessionSignals
from agentmesh.runtime.errors import AlreadyExists, NotFound, OutOfRange, Unavailable
from agentmesh.runtime.pagination import PageTokenCodec


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def event(content: str = "x", **fields: str) -> NewEvent:
    return NewEvent(agent="a", event_type=EventType.USER_MESSAGE, content=content, **fields)


class ObservedEventStore(InMemoryEventStore):
    """The memory package's in-memory store, recording every trim, and letting a test have a
    concurrent writer store an idempotency key first (`race_once_on`)."""

    def __init__(self) -> None:
        super().__init__()
        self.trims: list[tuple[str, int]] = []
        self.race_once_on: set[str] = set()

    async def append(self, session_id, project_id, batch, *, now, admit, expected_last_seq=None, fence=()):
        for new in batch:
            if new.idempotency_key in self.race_once_on:
                self.race_once_on.discard(new.idempotency_key)
                await super().append(session_id, project_id, [new], now=now, admit=lambda *_: None)
                raise IdempotencyKeyRace(session_id)
        return await super().append(
            session_id,
            project_id,
            batch,
            now=now,
            admit=admit,
            expected_last_seq=expected_last_seq,
            fence=fence,
        )

    async def trim_session(self, session_id: str, project_id: str, *, first_seq: int) -> int:
        self.trims.append((session_id, first_seq))
        return await super().trim_session(session_id, project_id, first_seq=first_seq)

    async def contents(self, session_id: str, project_id: str = "p-1") -> list[str]:
        query = EventQuery(session_id=session_id, project_id=project_id)
        events = await self.list_events(query, after=None, limit=1000)
        return [e.content for e in events]


@pytest.fixture
def store() -> ObservedEventStore:
    return ObservedEventStore()


@pytest.fixture
def signals() -> SessionSignals:
    return SessionSignals()


@pytest.fixture
def log(store: ObservedEventStore, signals: SessionSignals) -> EventLog:
    return EventLog(
        store,
        signals,
        page_tokens=PageTokenCodec(),
        max_event_bytes=1000,
        max_batch_events=100,
        watch_poll_seconds=3600,
        watch_batch_events=4,
    )


async def test_losing_an_idempotency_race_returns_the_winners_event(
    log: EventLog, store: ObservedEventStore
) -> None:
    await log.append("s-1", "p-1", [event("first")])
    store.race_once_on.add("k")

    result = await log.append("s-1", "p-1", [event("keyed", idempotency_key="k")])

    assert [e.seq for e in result.events] == [2]
    assert await store.contents("s-1") == ["first", "keyed"]


async def test_a_watch_follows_commits_without_polling(log: EventLog, signals: SessionSignals) -> None:
    await log.append("s-1", "p-1", [event(str(n)) for n in range(6)])
    seen: list[int] = []
    caught_up = asyncio.Event()

    async def watch() -> None:
        async for e in log.watch("s-1", after_seq=2):
            seen.append(e.seq)
            if e.seq == 6:
                caught_up.set()
            if e.seq == 9:
                return

    watcher = asyncio.create_task(watch())
    await caught_up.wait()
    await log.append("s-1", "p-1", [event("7"), event("8")])
    await log.append("s-1", "p-1", [event("9")])
    async with asyncio.timeout(30):  # the poll interval is an hour: only the commit signal can wake it
        await watcher
    assert seen == [3, 4, 5, 6, 7, 8, 9]


async def test_a_watch_reports_a_gap_left_by_retention(log: EventLog, store: ObservedEventStore) -> None:
    await log.append("s-1", "p-1", [event(str(n)) for n in range(20)])
    stream = log.watch("s-1", after_seq=0)
    seen = [(await anext(stream)).seq for _ in range(4)]  # one batch of four
    await store.trim_session("s-1", "p-1", first_seq=11)

    with pytest.raises(HistoryTrimmed) as caught:
        await anext(stream)

    assert seen == [1, 2, 3, 4]
    assert caught.value.metadata["first_seq"] == "11"


async def test_a_watch_ends_with_unavailable_when_the_service_stops(
    log: EventLog, signals: SessionSignals
) -> None:
    await log.append("s-1", "p-1", [event()])
    stream = log.watch("s-1")
    assert (await anext(stream)).seq == 1
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    signals.close()
    with pytest.raises(Unavailable) as caught:
        await waiting
    assert caught.value.metadata["after_seq"] == "1"


async def test_the_sweeper_trims_to_the_newest_events_in_small_batches(store: ObservedEventStore) -> None:
    log = EventLog(
        store, SessionSignals(), page_tokens=PageTokenCodec(), max_event_bytes=1000, max_batch_events=100
    )
    await log.append("s-1", "p-1", [event(str(n)) for n in range(50)])
    await log.append("s-2", "p-2", [event(str(n)) for n in range(50)])
    await log.set_retention_policy(RetentionPolicy(project_id="p-1", max_events_per_session=8))
    sweeper = RetentionSweeper(store, interval_seconds=1, batch_events=10)

    assert await sweeper.sweep() == 42

    assert [seq for _, seq in store.trims] == [11, 21, 31, 41, 43]
    assert (await log.get_session("s-1")).first_seq == 43
    assert (await log.get_session("s-2")).first_seq == 1
    assert await sweeper.sweep() == 0


async def test_the_sweeper_removes_events_older_than_the_max_age(store: ObservedEventStore) -> None:
    clock = Clock()
    log = EventLog(
        store,
        SessionSignals(),
        page_tokens=PageTokenCodec(),
        max_event_bytes=1000,
        max_batch_events=100,
        clock=clock,
    )
    await log.append("s-1", "p-1", [event(str(n)) for n in range(25)])
    clock.now += timedelta(minutes=10)
    await log.append("s-1", "p-1", [event("recent")])
    await log.set_retention_policy(RetentionPolicy(project_id="p-1", max_age_seconds=300))
    sweeper = RetentionSweeper(store, interval_seconds=1, batch_events=10, clock=clock)

    assert await sweeper.sweep() == 25

    assert [seq for _, seq in store.trims] == [11, 21, 26]
    assert await store.contents("s-1") == ["recent"]


@pytest.mark.parametrize(
    ("odd_one", "field"),
    [
        ({"agent": ""}, "agent"),
        ({"run_id": "r" * 256}, "run_id"),
        ({"parent_event_id": "line\nbreak"}, "parent_event_id"),
        ({"trace_id": "A" * 32}, "trace_id"),
        ({"span_id": "0" * 15}, "span_id"),
        ({"content": "nul \x00"}, "content"),
        ({"metadata": {"k": ["nul \x00"]}}, "metadata"),
        ({"idempotency_key": "k-3"}, "idempotency_key"),  # events[3]'s
    ],
)
async def test_one_bad_event_among_many_alike_is_named_alone(
    log: EventLog, store: ObservedEventStore, odd_one: dict, field: str
) -> None:
    # A batch's events are checked by their fields' distinct values, then named one by one.
    batch = [
        event(run_id="run-1", trace_id="0" * 32, span_id="1" * 16, idempotency_key=f"k-{index}")
        for index in range(60)
    ]
    batch[57] = batch[57].model_copy(update=odd_one)
    with pytest.raises(ValidationFailed) as caught:
        await log.append("s-1", "p-1", batch)
    assert [violation.field for violation in caught.value.violations] == [f"events[57].{field}"]
    assert await store.contents("s-1") == []


async def test_a_fork_is_read_listed_and_watched_as_a_session_of_its_own(log: EventLog) -> None:
    await log.append("s-1", "p-1", [event(f"s1-{n}") for n in range(1, 7)])
    fork = await log.fork("s-1", "p-1", at_seq=4, new_session_id="s-2")
    assert (fork.last_seq, fork.forked_from_session_id, fork.forked_at_seq) == (4, "s-1", 4)
    await log.append("s-2", "p-1", [event("s2-5"), event("s2-6")])

    # Paged in both directions across the fork point, under the fork's id.
    query = EventQuery(session_id="s-2", project_id="p-1")
    first = await log.list_events(query, page_size=3)
    rest = await log.list_events(query, page_size=3, page_token=first.next_page_token)
    assert [e.content for e in first.events + rest.events] == ["s1-1", "s1-2", "s1-3", "s1-4", "s2-5", "s2-6"]
    assert {e.session_id for e in first.events + rest.events} == {"s-2"}
    newest = await log.list_events(query.model_copy(update={"descending": True}), page_size=3)
    assert [e.seq for e in newest.events] == [6, 5, 4]
    counted = await log.list_events(query, page_size=1, include_total_size=True)
    assert counted.total_size == 6

    stream = log.watch("s-2", after_seq=2)
    seen = [await anext(stream) for _ in range(4)]
    await stream.aclose()
    assert [(e.seq, e.content, e.session_id) for e in seen] == [
        (3, "s1-3", "s-2"),
        (4, "s1-4", "s-2"),
        (5, "s2-5", "s-2"),
        (6, "s2-6", "s-2"),
    ]
    # The source is untouched.
    source = await log.list_events(EventQuery(session_id="s-1", project_id="p-1"))
    assert [e.content for e in source.events] == [f"s1-{n}" for n in range(1, 7)]


async def test_bad_forks_are_refused(log: EventLog) -> None:
    await log.append("s-1", "p-1", [event("one")])
    with pytest.raises(ValidationFailed):
        await log.fork("s-1", "p-1", at_seq=0)
    with pytest.raises(OutOfRange) as beyond:
        await log.fork("s-1", "p-1", at_seq=2)
    assert beyond.value.reason == "AT_SEQ_BEYOND_END"
    with pytest.raises(NotFound):
        await log.fork("s-9", "p-1", at_seq=1)
    with pytest.raises(AlreadyExists):
        await log.fork("s-1", "p-1", at_seq=1, new_session_id="s-1")
