"""The raw PostgreSQL baseline: asyncpg inserting ~300-byte JSON events into a plain table, with
no ORM, no gRPC and no rules — the limit the memory service's appends are compared with.

Three shapes, as the memory service is used: one event per transaction from one connection
(sequential), one per transaction from 16 connections (concurrent appenders), and 100 per
transaction (batched).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from bench.stats import Call, WorkerCall

TABLE = "bench_raw_events"
BATCH_EVENTS = 100

_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    agent text NOT NULL,
    event_type text NOT NULL,
    content jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
)
"""
INSERT_ONE = f"INSERT INTO {TABLE} (session_id, seq, agent, event_type, content) VALUES ($1, $2, $3, $4, $5)"


# The project the floor's appends go to, in the mesh's own database.
FLOOR_PROJECT = "bench-append-floor"


def memory_append(pool: asyncpg.Pool) -> Callable[[bytes], Awaitable[None]]:
    """The floor of an append: the memory service's own one-statement append (its
    `tables.APPEND_IN_ONE_STATEMENT`: the session's row bumped and locked, the events numbered
    under it, on the service's tables and indexes) run straight with asyncpg — the database work
    an AppendEvents call must do, with nothing else. The payload is
    `<session id>\n<events>\n<content>`."""
    from sqlalchemy.dialects.postgresql import asyncpg as dialect

    from agentmesh.memory.tables import APPEND_IN_ONE_STATEMENT

    compiled = APPEND_IN_ONE_STATEMENT.compile(dialect=dialect.dialect())
    statement, names = str(compiled), tuple(compiled.positiontup or ())

    async def append(payload: bytes) -> None:
        session_id, count, content = payload.decode().split("\n", 2)
        events = int(count)
        values = {
            "session_id": session_id,
            "project_id": FLOOR_PROJECT,
            "agent": "bench",
            "now": datetime.now(UTC),
            "count": events,
            "expected": None,
            "ids": [str(uuid.uuid4()) for _ in range(events)],
            "agents": ["bench"] * events,
            "event_types": ["agent_response"] * events,
            "contents": [content] * events,
            "metadatas": ['{"agent_name": "bench"}'] * events,
            "idempotency_keys": [None] * events,
            # What each event counts against its project's stored_bytes (its content, about).
            "sizes": [len(content.encode())] * events,
            "bytes": len(content.encode()) * events,
        }
        arguments = [values.get(name, [""] * events) for name in names]  # the other ids: empty
        if await pool.fetchrow(statement, *arguments) is None:
            raise RuntimeError(f"the floor's append to session {session_id} was refused")

    return append


async def create_raw_table(dsn: str) -> None:
    """The baseline's table, for an `insert` server to write into."""
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(_CREATE)
    finally:
        await connection.close()


def event_json(size: int = 300) -> str:
    """A JSON object of about `size` bytes, shaped like an agent's recorded answer."""
    text = {"role": "assistant", "text": "", "model": "mock", "step": 1}
    filler = size - len(json.dumps(text))
    text["text"] = ("lorem ipsum dolor sit amet " * (filler // 27 + 1))[: max(filler, 0)]
    return json.dumps(text)


@dataclass
class RawEventWriter:
    """Owns the baseline's connections and the table they write into."""

    connections: list[asyncpg.Connection]
    content: str

    @classmethod
    async def connect(cls, dsn: str, *, connections: int) -> RawEventWriter:
        opened = [await asyncpg.connect(dsn) for _ in range(connections)]
        await opened[0].execute(_CREATE)
        return cls(opened, event_json())

    async def close(self) -> None:
        for connection in self.connections:
            await connection.close()

    def _next_keys(self) -> tuple[str, itertools.count[int]]:
        return uuid.uuid4().hex, itertools.count(1)

    def single(self) -> Call:
        """One event per transaction, from the first connection, all into one session."""
        connection = self.connections[0]
        session, seqs = self._next_keys()

        async def insert() -> None:
            await connection.execute(INSERT_ONE, session, next(seqs), "bench", "agent_response", self.content)

        return insert

    def concurrent(self) -> WorkerCall:
        """One event per transaction; worker i uses connection i and a session of its own."""

        def make(worker: int) -> Call:
            connection = self.connections[worker]
            session, seqs = self._next_keys()

            async def insert() -> None:
                await connection.execute(
                    INSERT_ONE, session, next(seqs), "bench", "agent_response", self.content
                )

            return insert

        return make

    def batched(self) -> Call:
        """`BATCH_EVENTS` events in one transaction, from the first connection."""
        connection = self.connections[0]
        session, seqs = self._next_keys()

        async def insert_batch() -> None:
            rows = [
                (session, next(seqs), "bench", "agent_response", self.content) for _ in range(BATCH_EVENTS)
            ]
            async with connection.transaction():
                await connection.executemany(INSERT_ONE, rows)

        return insert_batch
