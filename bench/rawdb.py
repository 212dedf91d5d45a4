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
from dataclasses import dataclass

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
