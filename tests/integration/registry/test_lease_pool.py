"""Under a burst of run starts (the bench's 5,000 streams) the registry's main connection
pool has a queue: lease renewals and sweeps must not wait in it (they have a small pool of their
own on PostgreSQL), and a start that waited for its connection still gets its whole lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentmesh.registry.app import MIGRATIONS, VERSION_TABLE
from agentmesh.registry.store import RunLease, Visibility
from agentmesh.registry.store.sql import SqlRegistryStore
from agentmesh.runtime.database import create_engine, normalize_url, upgrade
from tests.integration.registry.test_store_contract import T0, _world

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=5)


@pytest.fixture
async def one_connection(postgres_database: str) -> AsyncIterator[AsyncEngine]:
    """A main pool of one connection that gives up after 3 s (the registry's is 20 and 30 s)."""
    engine = create_async_engine(
        normalize_url(postgres_database), pool_size=1, max_overflow=0, pool_timeout=3
    )
    yield engine
    await engine.dispose()


@pytest.fixture
async def store(postgres_database: str, one_connection: AsyncEngine) -> AsyncIterator[SqlRegistryStore]:
    lease_engine = create_engine(postgres_database, pool_size=2)
    store = SqlRegistryStore(one_connection, lease_engine=lease_engine)
    await upgrade(one_connection, MIGRATIONS, version_table=VERSION_TABLE)
    yield store
    await lease_engine.dispose()


async def test_renewals_and_sweeps_do_not_wait_for_the_main_pool(
    store: SqlRegistryStore, one_connection: AsyncEngine
) -> None:
    owner, _, _, agent = await _world(store)
    visible = Visibility(owner, everything=False)
    for run_id in ("renewed", "dropped"):
        await store.start_run(
            visible, agent.id, run_id, T0, lease=RunLease("session", "executor-a", T0 + LEASE)
        )

    leases = store.leases
    async with one_connection.connect():  # every connection of the main pool is taken
        later = T0 + LEASE - timedelta(seconds=1)
        assert await leases.renew("executor-a", [(agent.id, "renewed")], later + LEASE) == []
        assert await leases.interrupted("executor-a") == []
        assert await leases.expire(T0 + LEASE + timedelta(seconds=1)) == 1
        (orphan,) = await leases.claim("executor-b", T0 + LEASE * 2, T0 + LEASE * 3, 10)
        assert orphan.run_id == "dropped"
        await leases.close("executor-b", [(agent.id, "dropped")], T0)


async def test_a_start_that_waited_for_a_connection_gets_its_whole_lease(
    store: SqlRegistryStore, one_connection: AsyncEngine
) -> None:
    owner, _, _, agent = await _world(store)
    visible = Visibility(owner, everything=False)
    async with one_connection.connect():  # the start waits for this connection
        start = asyncio.create_task(
            store.start_run(
                visible, agent.id, "late", T0, lease=RunLease("session", "executor-a", T0 + LEASE)
            )
        )
        await asyncio.sleep(2)
        assert not start.done()
    await start
    # Granted for T0 + 5 s but written 2 s later: it lasts until at least T0 + 7 s.
    assert await store.leases.expire(T0 + LEASE + timedelta(seconds=1.5)) == 0
    assert await store.leases.expire(T0 + LEASE + timedelta(days=1)) == 1
