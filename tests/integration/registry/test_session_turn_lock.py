"""On PostgreSQL a session's turn is one call of `agentmesh_take_turn` (store/turns.py, migration
0010): it waits for the session's advisory lock, and what it sees is what was committed before the
lock was granted — a turn taken while another transaction (another registry replica, say) holds
the lock waits for it, then sees the turn that transaction took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from agentmesh.registry.app import MIGRATIONS, VERSION_TABLE
from agentmesh.registry.store import Visibility
from agentmesh.registry.store.sql import SqlRegistryStore
from agentmesh.runtime.database import create_engine, upgrade
from tests.integration.registry.test_session_turn_store_contract import _start
from tests.integration.registry.test_store_contract import _world

pytestmark = pytest.mark.postgres

SESSION = "session-1"
# The key an older registry took in its own transaction, and the function takes now.
_LOCK = sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))").bindparams(key=f"turns:{SESSION}")
_WAITING_FOR_ADVISORY_LOCK = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
)


@pytest.fixture
async def store(postgres_database: str) -> AsyncIterator[tuple[SqlRegistryStore, AsyncEngine]]:
    engine = create_engine(postgres_database)
    try:
        store = SqlRegistryStore(engine)
        await upgrade(engine, MIGRATIONS, version_table=VERSION_TABLE)
        yield store, engine
    finally:
        await engine.dispose()


async def _until_waiting(engine: AsyncEngine, taking: asyncio.Task[object]) -> None:
    """Returns once a call waits for an advisory lock; fails if `taking` ends first."""
    async with engine.connect() as connection:
        for _ in range(600):
            assert not taking.done(), f"the turn did not wait for the session's lock: {taking.result()}"
            if (await connection.execute(_WAITING_FOR_ADVISORY_LOCK)).scalar():
                return
            await connection.rollback()
            await asyncio.sleep(0.05)
    raise AssertionError("the turn never waited for the session's lock")


async def test_a_turn_waits_for_its_sessions_lock_and_sees_what_the_holder_took(
    store: tuple[SqlRegistryStore, AsyncEngine],
) -> None:
    registry_store, engine = store
    owner, _, _, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    for run_id in ("held", "waiting"):
        await _start(registry_store, visible, agent.id, run_id, "executor-1")
    async with engine.connect() as holder:
        await holder.execute(_LOCK)
        taking = asyncio.create_task(registry_store.leases.take_turn(SESSION, (agent.id, "waiting")))
        await _until_waiting(engine, taking)
        await holder.execute(
            sa.text("INSERT INTO session_turns (session_id, agent_id, run_id) VALUES (:s, :a, 'held')"),
            {"s": SESSION, "a": agent.id},
        )
        await holder.commit()
    assert await taking == [(agent.id, "held")]
    assert await registry_store.leases.turns_ahead((agent.id, "waiting")) == [(agent.id, "held")]
