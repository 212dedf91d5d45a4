"""The SQL store on SQLite and PostgreSQL: the schema the migrations build, and an append that
costs the same whatever the size of the session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.memory.app import MIGRATIONS, VERSION_TABLE
from agentmesh.memory.event_store import IdempotencyKeyRace
from agentmesh.memory.memory import EventLog
from agentmesh.memory.models import EventQuery, EventType, NewEvent
from agentmesh.memory.store import SqlEventStore
from agentmesh.memory.watch import SessionSignals
from agentmesh.runtime.database import create_engine, upgrade
from agentmesh.runtime.pagination import PageTokenCodec


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(engine: AsyncEngine) -> AsyncIterator[SqlEventStore]:
    store = SqlEventStore(engine)
    yield store
    await store.close()


class StatementLog:
    """The SQL an engine sends while `recording` is on: through SQLAlchemy, and straight through
    asyncpg on the connections it lends (the group commit's, on PostgreSQL), from the first
    checkout after the log is made."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.statements: list[str] = []
        self.recording = False
        sa.event.listen(engine.sync_engine, "before_cursor_execute", self._record_cursor)
        if engine.dialect.name == "postgresql":
            sa.event.listen(engine.sync_engine, "checkout", self._log_driver)

    def _log_driver(self, connection, _record, _proxy) -> None:
        connection.driver_connection.add_query_logger(self._record_query)  # once: a set

    def _record_cursor(self, _conn, _cursor, statement: str, *_args) -> None:
        self._record(statement)

    def _record_query(self, logged) -> None:
        self._record(logged.query)

    def _record(self, statement: str) -> None:
        if self.recording:
            self.statements.append(" ".join(statement.split()).lower())

    async def during(self, work) -> list[str]:
        self.statements, self.recording = [], True
        try:
            await work
        finally:
            self.recording = False
        return self.statements


def event(content: str, agent: str = "worker") -> NewEvent:
    return NewEvent(agent=agent, event_type=EventType.AGENT_RESPONSE, content=content)


async def test_migrations_build_the_schema_once_with_their_own_version_table(engine: AsyncEngine) -> None:
    await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)  # a second run is a no-op

    def inspect(connection):
        inspector = sa.inspect(connection)
        indexes = {index["name"]: index["column_names"] for index in inspector.get_indexes("memory_events")}
        return set(inspector.get_table_names()), indexes

    async with engine.connect() as connection:
        tables, indexes = await connection.run_sync(inspect)
        version = (await connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}"))).scalar_one()
    assert {"memory_sessions", "memory_events", "memory_retention_policies", VERSION_TABLE} <= tables
    assert version == "0008_stored_bytes"
    assert {"memory_deleted_projects", "memory_project_owners"} <= tables
    # The executor's context window: an agent's newest events in a session, found by index.
    assert indexes["ix_memory_events_session_agent_seq"] == ["project_id", "session_id", "agent", "seq"]
    # A run's events (an A2A task's, a followed or resumed run's): found by index, not a session scan.
    assert indexes["ix_memory_events_session_run_seq"] == ["project_id", "session_id", "run_id", "seq"]


async def test_an_append_sends_the_same_statements_to_a_big_session_as_to_an_empty_one(
    engine: AsyncEngine, store: SqlEventStore
) -> None:
    statements = StatementLog(engine)
    log = EventLog(
        store,
        SessionSignals(),
        page_tokens=PageTokenCodec(),
        max_event_bytes=10_000,
        max_batch_events=1000,
    )
    for start in range(0, 3000, 1000):
        await log.append("big", "p-1", [event(str(n), agent=f"a{n % 7}") for n in range(start, start + 1000)])

    into_empty = await statements.during(log.append("empty", "p-1", [event("first")]))
    into_big = await statements.during(log.append("big", "p-1", [event("next")]))

    assert into_big == into_empty
    # PostgreSQL: the upsert and the insert in one statement; SQLite: one after the other.
    assert len(into_big) == (1 if engine.dialect.name == "postgresql" else 2)
    for statement in into_big:
        assert "count(" not in statement
        assert "max(" not in statement
        assert "from memory_events" not in statement
    assert (await log.get_session("big")).last_seq == 3001


async def test_an_agents_window_reads_one_page_and_counts_nothing(
    engine: AsyncEngine, store: SqlEventStore
) -> None:
    log = EventLog(
        store,
        SessionSignals(),
        page_tokens=PageTokenCodec(),
        max_event_bytes=10_000,
        max_batch_events=1000,
    )
    await log.append("s-1", "p-1", [event(str(n), agent="a" if n % 2 else "b") for n in range(1000)])
    statements = StatementLog(engine)
    query = EventQuery(project_id="p-1", session_id="s-1", agent="a", descending=True)

    async def window():
        page = await log.list_events(query, page_size=20)
        assert [e.seq for e in page.events] == list(range(1000, 960, -2))

    sent = await statements.during(window())

    assert not any("count(" in statement for statement in sent)
    assert any("limit" in statement for statement in sent)


async def test_times_come_back_in_utc(store: SqlEventStore) -> None:
    now = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    stored, _ = await store.append("s-1", "p-1", [event("x")], now=now, admit=lambda project, last: None)
    [read] = await store.list_events(EventQuery(project_id="p-1", session_id="s-1"), after=None, limit=10)
    assert read.created_at == stored[0].created_at == now
    session = await store.get_session("s-1", "p-1")
    assert session is not None and session.created_at == now


async def test_an_idempotency_key_stored_before_is_a_race_and_writes_nothing(store: SqlEventStore) -> None:
    now = datetime(2030, 1, 2, tzinfo=UTC)
    keyed = NewEvent(agent="worker", event_type=EventType.AGENT_RESPONSE, content="x", idempotency_key="k")
    await store.append("s-1", "p-1", [keyed], now=now, admit=lambda project, last: None)

    with pytest.raises(IdempotencyKeyRace):
        await store.append("s-1", "p-1", [event("fresh"), keyed], now=now, admit=lambda project, last: None)

    session = await store.get_session("s-1", "p-1")
    assert session is not None and session.last_seq == 1
    stored = await store.list_events(EventQuery(project_id="p-1", session_id="s-1"), after=None, limit=10)
    assert [e.content for e in stored] == ["x"]


async def test_an_append_refused_by_a_session_that_then_changes_is_decided_again(
    store: SqlEventStore,
) -> None:
    # The session is at seq 1, not at the expected 5: the database refuses the append. Here admit
    # lets it through, as when the session reached seq 5 between the refusal and the read saying
    # why: the append is decided again, under the session's lock, and stored gap-free.
    now = datetime(2030, 1, 2, tzinfo=UTC)
    await store.append("s-1", "p-1", [event("one")], now=now, admit=lambda project, last: None)
    admitted: list[tuple[str, int]] = []

    stored, last_seq = await store.append(
        "s-1", "p-1", [event("two")], now=now, admit=lambda *seen: admitted.append(seen), expected_last_seq=5
    )

    assert (last_seq, [e.seq for e in stored]) == (2, [2])
    assert admitted and set(admitted) == {("p-1", 1)}
    read = await store.list_events(EventQuery(project_id="p-1", session_id="s-1"), after=None, limit=10)
    assert [(e.seq, e.content) for e in read] == [(1, "one"), (2, "two")]


async def test_sessions_stored_before_project_scoping_keep_their_events(database_url: str) -> None:
    from alembic import command
    from alembic.config import Config

    def migrate(connection, revision: str) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        config.attributes["version_table"] = VERSION_TABLE
        command.upgrade(config, revision)

    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(migrate, "0001")
            at = datetime(2026, 1, 2, tzinfo=UTC)
            await connection.execute(
                sa.text(
                    "INSERT INTO memory_sessions (id, project_id, agent, created_at, updated_at, last_seq, "
                    "first_seq) VALUES ('old', 'p-1', 'worker', :at, :at, 2, 1)"
                ),
                {"at": at},
            )
            for seq in (1, 2):
                await connection.execute(
                    sa.text(
                        "INSERT INTO memory_events (session_id, seq, id, project_id, agent, event_type, "
                        "content, metadata, run_id, parent_event_id, delegation_id, trace_id, span_id, "
                        "idempotency_key, created_at) VALUES ('old', :seq, :id, 'p-1', 'worker', "
                        "'agent_response', :content, '{}', '', '', '', '', '', :key, :at)"
                    ),
                    {"seq": seq, "id": f"e-{seq}", "content": f"before {seq}", "key": f"k-{seq}", "at": at},
                )
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        store = SqlEventStore(engine)
        log = EventLog(
            store,
            SessionSignals(),
            page_tokens=PageTokenCodec(),
            max_event_bytes=10_000,
            max_batch_events=10,
        )
        # Found by its id alone (it is the only one), and appended to in its own project.
        assert (await log.get_session("old")).last_seq == 2
        result = await log.append(
            "old", "p-1", [event("after"), event("before 1").model_copy(update={"idempotency_key": "k-1"})]
        )
        assert [e.seq for e in result.events] == [3, 1]
        page = await log.list_events(EventQuery(session_id="old", project_id="p-1"))
        assert [e.content for e in page.events] == ["before 1", "before 2", "after"]
        # Another project may now use the same id.
        assert (await log.append("old", "p-2", [event("theirs")])).last_seq == 1
        await store.close()
    finally:
        await engine.dispose()
