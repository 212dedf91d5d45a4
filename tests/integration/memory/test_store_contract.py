"""The EventStore contract: one suite over every implementation (in memory, SQLite, PostgreSQL),
asserting what the memory rules rely on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.memory.app import MIGRATIONS, VERSION_TABLE
from agentmesh.memory.errors import ProjectDeleted
from agentmesh.memory.event_store import EventStore, IdempotencyKeyRace
from agentmesh.memory.forks import fork_lineage
from agentmesh.memory.in_memory_store import InMemoryEventStore
from agentmesh.memory.models import Event, EventQuery, EventType, NewEvent, RetentionPolicy, RunState, Session
from agentmesh.memory.store import SqlEventStore
from agentmesh.runtime.database import create_engine, upgrade

T0 = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


@pytest.fixture
async def store(store_database_url: str | None) -> AsyncIterator[EventStore]:
    if store_database_url is None:
        yield InMemoryEventStore()
        return
    engine = create_engine(store_database_url)
    try:
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        store = SqlEventStore(engine)
        yield store
        await store.close()
    finally:
        await engine.dispose()


class Refused(Exception):
    """What the test's admit raises to refuse an append."""


def admit_all(_project_id: str, _last_seq: int) -> None:
    return None


def admit_as(project_id: str, *, expected_last_seq: int | None = None):
    """An admit as the rules make it: the session must be the project's, and at the expected seq."""

    def admit(session_project: str, last_seq: int) -> None:
        if session_project and session_project != project_id:
            raise Refused("another project's session")
        if expected_last_seq is not None and last_seq != expected_last_seq:
            raise Refused(f"at {last_seq}, not {expected_last_seq}")

    return admit


def new(content: str = "x", agent: str = "worker", **fields: object) -> NewEvent:
    return NewEvent(agent=agent, event_type=EventType.AGENT_RESPONSE, content=content, **fields)


async def append(
    store: EventStore,
    session_id: str,
    batch: list[NewEvent],
    *,
    project_id: str = "p-1",
    now: datetime = T0,
    expected_last_seq: int | None = None,
) -> tuple[list[Event], int]:
    return await store.append(
        session_id,
        project_id,
        batch,
        now=now,
        admit=admit_as(project_id, expected_last_seq=expected_last_seq),
        expected_last_seq=expected_last_seq,
    )


async def everything(store: EventStore, session_id: str, project_id: str = "p-1") -> list[Event]:
    query = EventQuery(session_id=session_id, project_id=project_id)
    return await store.list_events(query, after=None, limit=1000)


# --- appending ----------------------------------------------------------------------------------


async def test_appends_number_events_gap_free_and_store_every_field(store: EventStore) -> None:
    first, last_seq = await append(store, "s-1", [new("a"), new("b", agent="helper")])
    full = new(
        "c",
        metadata={"tokens": 3, "nested": {"ok": True}},
        run_id="run-1",
        parent_event_id="e-0",
        delegation_id="d-1",
        trace_id="0" * 32,
        span_id="1" * 16,
        idempotency_key="key-1",
    )
    second, last_after = await append(store, "s-1", [full], now=T0 + timedelta(seconds=1))

    assert ([e.seq for e in first], last_seq, [e.seq for e in second], last_after) == ([1, 2], 2, [3], 3)
    stored = await everything(store, "s-1")
    assert stored == first + second
    assert stored[2].model_dump(include=set(NewEvent.model_fields)) == full.model_dump()
    assert (stored[2].session_id, stored[2].created_at) == ("s-1", T0 + timedelta(seconds=1))
    assert len({e.id for e in stored}) == 3
    session = await store.get_session("s-1", "p-1")
    assert session is not None
    assert (session.project_id, session.agent, session.first_seq, session.last_seq) == ("p-1", "worker", 1, 3)
    assert (session.created_at, session.updated_at) == (T0, T0 + timedelta(seconds=1))
    assert await store.get_session("s-2", "p-1") is None


async def test_a_reset_context_starts_at_the_last_seq_and_keeps_every_event(store: EventStore) -> None:
    await append(store, "s-1", [new("a"), new("b")])
    assert (await store.get_session("s-1", "p-1")).context_start_seq == 0  # type: ignore[union-attr]

    reset = await store.reset_context("s-1", "p-1")
    assert reset is not None and reset.context_start_seq == reset.last_seq == 2
    await append(store, "s-1", [new("c")])
    session = await store.get_session("s-1", "p-1")
    assert session is not None and (session.context_start_seq, session.last_seq) == (2, 3)
    assert [e.seq for e in await everything(store, "s-1")] == [1, 2, 3]  # the log keeps everything
    assert await store.reset_context("s-1", "another-project") is None
    assert await store.reset_context("no-such-session", "p-1") is None


async def test_concurrent_appends_to_one_session_leave_no_gap(store: EventStore) -> None:
    await append(store, "s-1", [new("first")])
    results = await asyncio.gather(*(append(store, "s-1", [new(f"{n}a"), new(f"{n}b")]) for n in range(8)))
    seqs = sorted(seq for events, _ in results for seq in (e.seq for e in events))
    assert seqs == list(range(2, 18))
    for events, last_seq in results:
        assert [e.seq for e in events] == [last_seq - 1, last_seq]
    assert [e.seq for e in await everything(store, "s-1")] == list(range(1, 18))


async def test_a_refused_append_writes_nothing(store: EventStore) -> None:
    with pytest.raises(Refused):
        await append(store, "new", [new()], expected_last_seq=4)
    assert await store.get_session("new", "p-1") is None

    await append(store, "s-1", [new("one")])
    with pytest.raises(Refused):
        await append(store, "s-1", [new("stale")], expected_last_seq=0)
    events, last_seq = await append(store, "s-1", [new("current")], expected_last_seq=1)

    assert ([e.seq for e in events], last_seq) == ([2], 2)
    assert [e.content for e in await everything(store, "s-1")] == ["one", "current"]
    session = await store.get_session("s-1", "p-1")
    assert session is not None and (session.project_id, session.last_seq) == ("p-1", 2)


async def test_admit_is_told_the_sessions_project_and_last_seq(store: EventStore) -> None:
    told: list[tuple[str, int]] = []

    def admit(project_id: str, last_seq: int) -> None:
        told.append((project_id, last_seq))

    await store.append("s-1", "p-1", [new(), new()], now=T0, admit=admit)
    await store.append("s-1", "p-1", [new()], now=T0, admit=admit)
    # A new session is the appending project's at seq 0.
    assert told == [("p-1", 0), ("p-1", 2)]


async def test_an_idempotency_key_is_stored_once_per_session(store: EventStore) -> None:
    stored, _ = await append(store, "s-1", [new("first", idempotency_key="k-1"), new("plain")])
    await append(store, "s-2", [new("elsewhere", idempotency_key="k-1")])  # another session: no clash

    with pytest.raises(IdempotencyKeyRace):
        await append(store, "s-1", [new("new", idempotency_key="k-2"), new("again", idempotency_key="k-1")])

    assert await store.events_by_idempotency_key("s-1", "p-1", ["k-1", "k-2", "k-3"]) == {"k-1": stored[0]}
    assert [e.content for e in await everything(store, "s-1")] == ["first", "plain"]
    session = await store.get_session("s-1", "p-1")
    assert session is not None and session.last_seq == 2
    # Appends go on gap-free after the refused one.
    events, _ = await append(store, "s-1", [new("next", idempotency_key="k-2")])
    assert [e.seq for e in events] == [3]


async def test_two_projects_may_use_one_session_id_without_meeting(store: EventStore) -> None:
    mine, _ = await append(store, "shared", [new("mine", idempotency_key="k")])
    theirs, last_seq = await append(store, "shared", [new("theirs", idempotency_key="k")], project_id="p-2")

    assert ([e.seq for e in mine], [e.seq for e in theirs], last_seq) == ([1], [1], 1)
    assert [e.content for e in await everything(store, "shared")] == ["mine"]
    assert [e.content for e in await everything(store, "shared", "p-2")] == ["theirs"]
    assert await store.events_by_idempotency_key("shared", "p-2", ["k"]) == {"k": theirs[0]}
    assert [s.project_id for s in await store.sessions_with_id("shared", limit=5)] == ["p-1", "p-2"]
    assert await store.get_session("shared", "p-3") is None


# --- deletion -----------------------------------------------------------------------------------


async def test_a_deleted_project_loses_its_sessions_and_takes_no_more(store: EventStore) -> None:
    await append(store, "s-1", [new("one"), new("two")])
    await append(store, "s-2", [new("three")])
    await append(store, "s-1", [new("kept")], project_id="p-2")
    await store.set_retention_policy(RetentionPolicy(project_id="p-1", max_age_seconds=60), now=T0)

    assert await store.delete_project("p-1", now=T0) == 2
    assert await store.delete_project("p-1", now=T0) == 0  # again: nothing left, no error

    assert await store.get_session("s-1", "p-1") is None
    assert await everything(store, "s-1") == []
    assert await store.count_sessions("p-1") == 0
    assert await store.get_retention_policy("p-1") is None
    with pytest.raises(ProjectDeleted):
        await append(store, "s-3", [new("late")])
    with pytest.raises(ProjectDeleted):
        await append(store, "s-1", [new("late")])
    assert await store.get_session("s-3", "p-1") is None
    assert await store.erase_deleted_projects() == 0
    assert [e.content for e in await everything(store, "s-1", "p-2")] == ["kept"]


# --- reading ------------------------------------------------------------------------------------


async def test_events_page_by_seq_either_way_with_filters(store: EventStore) -> None:
    await append(
        store,
        "s-1",
        [
            new(str(n), agent="a" if n % 2 else "b", run_id=f"run-{n % 3}")
            if n != 4
            else NewEvent(agent="b", event_type=EventType.TOOL_CALL, content="4", run_id="run-1")
            for n in range(1, 10)
        ],
    )
    query = EventQuery(project_id="p-1", session_id="s-1")

    assert [e.seq for e in await store.list_events(query, after=None, limit=4)] == [1, 2, 3, 4]
    assert [e.seq for e in await store.list_events(query, after=(4,), limit=4)] == [5, 6, 7, 8]
    newest = query.model_copy(update={"descending": True})
    assert [e.seq for e in await store.list_events(newest, after=None, limit=3)] == [9, 8, 7]
    assert [e.seq for e in await store.list_events(newest, after=(7,), limit=3)] == [6, 5, 4]

    agent_a = EventQuery(project_id="p-1", session_id="s-1", agent="a")
    assert [e.seq for e in await store.list_events(agent_a, after=None, limit=10)] == [1, 3, 5, 7, 9]
    tool_calls = EventQuery(project_id="p-1", session_id="s-1", event_types=(EventType.TOOL_CALL,))
    assert [e.seq for e in await store.list_events(tool_calls, after=None, limit=10)] == [4]
    run_1 = EventQuery(project_id="p-1", session_id="s-1", run_id="run-1")
    assert [e.seq for e in await store.list_events(run_1, after=None, limit=10)] == [1, 4, 7]
    later = EventQuery(project_id="p-1", session_id="s-1", after_seq=6)
    assert [e.seq for e in await store.list_events(later, after=None, limit=10)] == [7, 8, 9]
    assert [await store.count_events(q) for q in (query, agent_a, tool_calls, run_1, later)] == [
        9,
        5,
        1,
        3,
        3,
    ]


async def test_events_are_filtered_by_how_their_run_stands_before_paging(store: EventStore) -> None:
    def asked(run_id: str) -> NewEvent:
        return NewEvent(agent="a", event_type=EventType.USER_MESSAGE, content=run_id, run_id=run_id)

    def ended(run_id: str, kind: EventType, code: str = "") -> NewEvent:
        metadata = {"code": code} if code else {}
        return NewEvent(
            agent="a", event_type=kind, run_id=run_id, metadata=metadata, idempotency_key=f"{run_id}:end"
        )

    runs = ["answered", "failed", "cancelled", "going", "quiet"]
    await append(store, "s-1", [asked(run) for run in runs] + [new("no run", agent="a")], now=T0)
    await append(store, "s-1", [ended("answered", EventType.AGENT_RESPONSE)], now=T0 + timedelta(seconds=1))
    await append(store, "s-1", [ended("failed", EventType.ERROR, "INTERNAL")], now=T0 + timedelta(seconds=2))
    await append(
        store, "s-1", [ended("cancelled", EventType.ERROR, "CANCELLED")], now=T0 + timedelta(seconds=3)
    )
    going = NewEvent(agent="b", event_type=EventType.TOOL_CALL, run_id="going")  # a step, not an end
    await append(store, "s-1", [going], now=T0 + timedelta(seconds=4))
    await append(store, "s-2", [asked("elsewhere"), ended("elsewhere", EventType.AGENT_RESPONSE)], now=T0)

    asks = EventQuery(project_id="p-1", agent="a", event_types=(EventType.USER_MESSAGE,))

    async def listed(**filters: object) -> list[str]:
        query = asks.model_copy(update=filters)
        found = [e.content for e in await store.list_events(query, after=None, limit=100)]
        assert await store.count_events(query) == len(found)
        return found

    assert await listed(run_states=(RunState.ANSWERED,)) == ["answered", "elsewhere"]
    assert await listed(run_states=(RunState.FAILED,)) == ["failed"]
    assert await listed(run_states=(RunState.CANCELLED,)) == ["cancelled"]
    assert await listed(run_states=(RunState.RUNNING,)) == ["going", "quiet"]
    assert await listed(run_states=(RunState.RUNNING, RunState.FAILED)) == ["failed", "going", "quiet"]
    assert await listed(run_states=(RunState.ANSWERED,), session_id="s-1") == ["answered"]
    # A run's latest event, whichever it is, says when it was last active.
    assert await listed(run_active_since=T0 + timedelta(seconds=2)) == ["failed", "cancelled", "going"]
    assert await listed(run_active_since=T0 + timedelta(seconds=5)) == []
    assert await listed(run_active_since=T0) == [*runs, "elsewhere"]  # the event with no run is out
    # Pages hold only what matches: the first page of two running runs is both of them.
    running = asks.model_copy(update={"run_states": (RunState.RUNNING,)})
    first = await store.list_events(running, after=None, limit=1)
    assert [e.content for e in first] == ["going"]
    last = first[-1]
    rest = await store.list_events(running, after=(last.created_at, last.session_id, last.seq), limit=1)
    assert [e.content for e in rest] == ["quiet"]


async def test_an_agents_events_across_a_project_are_in_time_order(store: EventStore) -> None:
    await append(store, "s-b", [new("b1"), new("other", agent="helper")], now=T0)
    await append(store, "s-a", [new("a1")], now=T0)
    await append(store, "s-a", [new("a2")], now=T0 + timedelta(seconds=1))
    await append(store, "s-c", [new("elsewhere")], project_id="p-2", now=T0)
    query = EventQuery(project_id="p-1", agent="worker")

    page = await store.list_events(query, after=None, limit=2)
    assert [e.content for e in page] == ["a1", "b1"]  # same time: by session id, then seq
    last = page[-1]
    rest = await store.list_events(query, after=(last.created_at, last.session_id, last.seq), limit=2)
    assert [e.content for e in rest] == ["a2"]
    assert await store.count_events(query) == 3


async def test_sessions_are_listed_most_recently_active_first(store: EventStore) -> None:
    for n, session_id in enumerate(["s-1", "s-2", "s-3", "s-4"]):
        await append(store, session_id, [new()], now=T0 + timedelta(seconds=n))
    await append(store, "s-1", [new()], now=T0 + timedelta(seconds=10))  # active again
    await append(store, "other", [new()], project_id="p-2", now=T0 + timedelta(seconds=20))

    first = await store.list_sessions("p-1", after=None, limit=2)
    assert [s.id for s in first] == ["s-1", "s-4"]
    rest = await store.list_sessions("p-1", after=(first[-1].updated_at, first[-1].id), limit=5)
    assert [s.id for s in rest] == ["s-3", "s-2"]
    assert (await store.count_sessions("p-1"), await store.count_sessions("p-3")) == (4, 0)


async def test_a_session_page_boundary_is_the_key_of_the_last_session_before_it(store: EventStore) -> None:
    for n, session_id in enumerate(["s-1", "s-2", "s-3"]):
        await append(store, session_id, [new()], now=T0 + timedelta(seconds=n))
    assert await store.session_boundary("p-1", skip=2) == (T0 + timedelta(seconds=1), "s-2")
    assert await store.session_boundary("p-1", skip=9) == (T0, "s-1")  # past the end: the last one
    assert await store.session_boundary("p-2", skip=2) is None


# --- retention ----------------------------------------------------------------------------------


async def test_retention_policies_are_kept_per_project(store: EventStore) -> None:
    assert await store.get_retention_policy("p-1") is None
    await store.set_retention_policy(RetentionPolicy(project_id="p-2", max_age_seconds=60), now=T0)
    await store.set_retention_policy(RetentionPolicy(project_id="p-1", max_events_per_session=5), now=T0)
    await store.set_retention_policy(RetentionPolicy(project_id="p-3"), now=T0)  # unbounded
    replaced = RetentionPolicy(project_id="p-1", max_events_per_session=9, max_age_seconds=30)
    await store.set_retention_policy(replaced, now=T0)

    assert await store.get_retention_policy("p-1") == replaced
    assert [p.project_id for p in await store.bounded_retention_policies()] == ["p-1", "p-2"]


async def test_sessions_are_trimmed_from_the_front(store: EventStore) -> None:
    await append(store, "long", [new(str(n)) for n in range(10)], now=T0)
    await append(store, "short", [new("1")], now=T0 + timedelta(hours=1))
    await append(store, "young", [new(str(n)) for n in range(3)], now=T0 + timedelta(hours=2))

    too_long = await store.sessions_to_trim(
        "p-1", more_events_than=2, created_before=None, after_id="", limit=10
    )
    assert [s.id for s in too_long] == ["long", "young"]
    too_old = await store.sessions_to_trim(
        "p-1", more_events_than=None, created_before=T0 + timedelta(minutes=90), after_id="", limit=10
    )
    assert [s.id for s in too_old] == ["long", "short"]
    assert [
        s.id
        for s in await store.sessions_to_trim(
            "p-1", more_events_than=2, created_before=None, after_id="long", limit=1
        )
    ] == ["young"]

    assert (
        await store.expired_prefix_end("young", "p-1", from_seq=1, cutoff=T0 + timedelta(hours=3), limit=2)
        == 3
    )
    assert await store.expired_prefix_end("young", "p-1", from_seq=1, cutoff=T0, limit=10) == 1

    assert await store.trim_session("long", "p-1", first_seq=8) == 7
    assert await store.trim_session("long", "p-1", first_seq=5) == 0  # never backwards
    assert await store.trim_session("long", "p-1", first_seq=20) == 0  # never past the next seq
    assert [e.seq for e in await everything(store, "long")] == [8, 9, 10]
    session = await store.get_session("long", "p-1")
    assert session is not None and (session.first_seq, session.last_seq) == (8, 10)

    assert await store.trim_session("short", "p-1", first_seq=2) == 1  # everything, up to the next seq
    events, _ = await append(store, "short", [new("after")])
    assert [e.seq for e in events] == [2]
    assert [e.content for e in await everything(store, "short")] == ["after"]


def fork_of(source: Session, at_seq: int, fork_id: str) -> Session:
    return source.model_copy(
        update={
            "id": fork_id,
            "last_seq": at_seq,
            "forked_from_session_id": source.id,
            "forked_at_seq": at_seq,
            "lineage": fork_lineage(source, at_seq),
        }
    )


async def test_a_fork_reads_its_lineage_up_to_each_bound_then_its_own_events(store: EventStore) -> None:
    await store.append("s-1", "p-1", [new(f"s1-{n}") for n in range(1, 6)], now=T0, admit=admit_all)
    source = await store.get_session("s-1", "p-1")
    assert source is not None
    child = fork_of(source, 3, "s-2")
    assert child.lineage == (("s-1", 3),)
    assert await store.create_session(child)
    assert not await store.create_session(child)  # its id is taken now
    stored, last_seq = await store.append("s-2", "p-1", [new("s2-4"), new("s2-5")], now=T0, admit=admit_all)
    assert [e.seq for e in stored] == [4, 5] and last_seq == 5
    grandchild = fork_of((await store.get_session("s-2", "p-1")), 4, "s-3")  # type: ignore[arg-type]
    assert grandchild.lineage == (("s-2", 4), ("s-1", 3))
    assert await store.create_session(grandchild)
    await store.append("s-3", "p-1", [new("s3-5")], now=T0, admit=admit_all)

    def query(session: Session, **fields: object) -> EventQuery:
        return EventQuery(session_id=session.id, project_id="p-1", lineage=session.lineage, **fields)

    read = await store.list_events(query(grandchild), after=None, limit=100)
    assert [e.content for e in read] == ["s1-1", "s1-2", "s1-3", "s2-4", "s3-5"]
    newest = await store.list_events(query(grandchild, descending=True), after=(5,), limit=2)
    assert [e.content for e in newest] == ["s2-4", "s1-3"]
    assert await store.count_events(query(grandchild, after_seq=2)) == 3
    # The source is untouched: its own events only.
    own = await store.list_events(EventQuery(session_id="s-1", project_id="p-1"), after=None, limit=100)
    assert [e.content for e in own] == [f"s1-{n}" for n in range(1, 6)]


def test_a_fork_below_a_forks_own_events_skips_the_fork_in_its_lineage() -> None:
    source = Session(
        id="s-2",
        project_id="p-1",
        agent="a",
        created_at=T0,
        updated_at=T0,
        last_seq=9,
        first_seq=1,
        lineage=(("s-1", 5),),
    )
    assert fork_lineage(source, 4) == (("s-1", 4),)
    assert fork_lineage(source, 5) == (("s-1", 5),)
    assert fork_lineage(source, 6) == (("s-2", 6), ("s-1", 5))
