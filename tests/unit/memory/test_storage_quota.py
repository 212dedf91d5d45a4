"""StoredBytesQuota's reuse of what it read: a project's limit and count are read once per
interval (once for appends that miss together), this replica's appends are added meanwhile, an
unlimited project's count is never read, and a registry that cannot be reached leaves the last
limit in force."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh.memory.models import EventType, NewEvent
from agentmesh.memory.storage_quota import StoredBytesQuota
from agentmesh.runtime.errors import QuotaExceeded

STEP = [NewEvent(agent="a", event_type=EventType.AGENT_RESPONSE, content="step", run_id="r")]
END = [
    NewEvent(
        agent="a", event_type=EventType.AGENT_RESPONSE, content="end", run_id="r", idempotency_key="r:end"
    )
]


class Registry:
    def __init__(self, limit: int) -> None:
        self.limit, self.reachable, self.asked = limit, True, 0

    async def limit_of(self, _project_id: str) -> int:
        self.asked += 1
        if not self.reachable:
            raise ConnectionError("registry unreachable")
        return self.limit


class Count:
    def __init__(self) -> None:
        self.stored, self.read = 0, 0

    async def of(self, _project_id: str) -> int:
        self.read += 1
        return self.stored


def quota(registry: Registry, count: Count, clock: list[float]) -> StoredBytesQuota:
    return StoredBytesQuota(
        limit_of=registry.limit_of,
        stored_bytes_of=count.of,
        retry_after_seconds=60,
        ttl_seconds=2,
        clock=lambda: clock[0],
    )


async def test_reads_once_per_interval_and_counts_its_own_appends_between() -> None:
    registry, count, clock = Registry(100), Count(), [0.0]
    limits = quota(registry, count, clock)
    await asyncio.gather(*(limits.check("p", STEP) for _ in range(5)))
    assert (registry.asked, count.read) == (1, 1)
    limits.stored("p", 100)  # this replica's append: at the limit before the next read
    with pytest.raises(QuotaExceeded) as refused:
        await limits.check("p", STEP)
    assert refused.value.metadata["quota_limit"] == "stored_bytes"
    assert refused.value.metadata["quota_subject"] == "project:p"
    await limits.check("p", END)  # a run's end is never refused
    count.stored = 40  # retention removed some, as the next read sees
    clock[0] = 2.0
    await limits.check("p", STEP)
    assert (registry.asked, count.read) == (2, 2)


async def test_an_unlimited_project_is_never_counted() -> None:
    registry, count, clock = Registry(0), Count(), [0.0]
    count.stored = 10**12
    await quota(registry, count, clock).check("p", STEP)
    assert count.read == 0


async def test_an_unreachable_registry_leaves_the_last_limit_in_force() -> None:
    registry, count, clock = Registry(10), Count(), [0.0]
    count.stored = 10
    limits = quota(registry, count, clock)
    with pytest.raises(QuotaExceeded):
        await limits.check("p", STEP)
    registry.reachable, clock[0] = False, 5.0
    with pytest.raises(QuotaExceeded):
        await limits.check("p", STEP)
    # Never read at all: no limit is known, and appends go on.
    await quota(registry, count, clock).check("q", STEP)
