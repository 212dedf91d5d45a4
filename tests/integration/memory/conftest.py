"""A memory service on a loopback port, on each database backend, and a client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh.memory.app import start
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.settings import MemorySettings
from agentmesh.runtime.service import RunningService
from tests.bearer import authorized_channel
from tests.mesh import JWT_SECRET

MAX_EVENT_BYTES = 4096


@pytest.fixture
def memory_settings(database_url: str) -> MemorySettings:
    return MemorySettings(
        database_url=database_url,
        jwt_secret=JWT_SECRET,
        host="127.0.0.1",
        port=0,
        max_event_bytes=MAX_EVENT_BYTES,
        max_batch_events=100,
        retention_sweep_seconds=0.05,
        retention_batch_events=7,
        watch_poll_seconds=0.2,
        watch_batch_events=64,
    )


@pytest.fixture
async def memory_service(memory_settings: MemorySettings) -> AsyncIterator[RunningService]:
    service = await start(memory_settings)
    yield service
    await service.stop(0)


@pytest.fixture
async def memory(memory_service: RunningService) -> AsyncIterator[MemoryClient]:
    # As the other services reach memory: the shared interceptors, and a system token.
    channel = authorized_channel(memory_service.address)
    yield MemoryClient(channel)
    await channel.close()
