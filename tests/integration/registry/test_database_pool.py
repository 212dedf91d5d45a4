"""A registry whose database connection pool stays exhausted answers UNAVAILABLE, reason
DATABASE_POOL_EXHAUSTED, naming its database — retryable — instead of INTERNAL
(docs/durability.md, "A database that is away"). On PostgreSQL: a registry with a pool of one
connection (two under a burst) and a one-second pool timeout; the test holds a lock on `projects`
from a connection of its own, so two calls that read it hold both pooled connections while they
wait; a third call finds none free."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentmesh.registry.app import start
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.errors import NotFound, Unavailable
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.service import RunningService
from tests.bearer import service_channel
from tests.integration.registry.support import JWT_SECRET, make_settings
from tests.mesh import bearer
from tests.polling import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


@pytest.fixture
async def small_pool_registry(postgres_database: str) -> AsyncIterator[RunningService]:
    settings = make_settings(postgres_database, database_pool_size=1, database_pool_timeout_seconds=1.0)
    service = await start(settings)
    yield service
    await service.stop(0)


async def test_an_exhausted_pool_answers_unavailable_naming_it(
    small_pool_registry: RunningService, postgres_database: str
) -> None:
    metadata = bearer(TokenCodec(JWT_SECRET).system_token())
    holder = await asyncpg.connect(postgres_database.replace("postgresql+asyncpg://", "postgresql://"))
    async with service_channel(small_pool_registry.address, JWT_SECRET) as channel:
        client = RegistryClient(channel)
        try:
            locked = holder.transaction()
            await locked.start()
            await holder.execute("LOCK TABLE projects IN ACCESS EXCLUSIVE MODE")
            # Two calls wait for the lock, each holding one of the pool's two connections.
            waiting = [
                asyncio.ensure_future(client.get_project(project_id=uuid.uuid4().hex, metadata=metadata))
                for _ in range(2)
            ]

            async def both_wait() -> bool:
                count = await holder.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'projects'::regclass"
                )
                return count == 2

            await eventually(both_wait, timeout=30, what="two calls wait for the lock")

            with pytest.raises(Unavailable) as refused:
                await client.get_project(project_id=uuid.uuid4().hex, metadata=metadata)
            assert refused.value.reason == "DATABASE_POOL_EXHAUSTED"
            assert "registry service's database connections are all in use" in str(refused.value)
            assert "try again" in str(refused.value)

            await locked.rollback()
            # Once the lock is gone the waiting calls go on (the project is unknown), and so does
            # a new one: nothing was left broken.
            for call in waiting:
                with pytest.raises(NotFound):
                    await call
            with pytest.raises(NotFound):
                await client.get_project(project_id=uuid.uuid4().hex, metadata=metadata)
        finally:
            await holder.close()
