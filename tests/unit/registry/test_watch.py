"""The registry's fan-out of agents' changes (`registry/watch.py`): every watch starts with a
reset, takes what committed since in order and in one batch, turns an overflow into a reset
rather than blocking the registry or dropping the watcher, and ends when the registry stops."""

from __future__ import annotations

import asyncio

from agentmesh.registry.agents.watch import MAX_QUEUED_CHANGES, AgentChange, AgentWatch
from agentmesh.registry.models import AgentStatus


async def test_a_watch_starts_with_a_reset_then_takes_changes_in_order() -> None:
    watch = AgentWatch()
    async with watch.watch() as watcher:
        first = await watcher.take()
        assert first is not None and first.reset and first.changes == []
        watch.changed(AgentChange("a", status=AgentStatus.PAUSED))
        watch.changed(AgentChange("b", spec_changed=True))
        batch = await watcher.take()
        assert batch is not None and not batch.reset
        assert [(c.agent_id, c.status, c.spec_changed) for c in batch.changes] == [
            ("a", AgentStatus.PAUSED, False),
            ("b", None, True),
        ]


async def test_a_reset_or_an_overflow_replaces_what_was_queued() -> None:
    watch = AgentWatch()
    async with watch.watch() as watcher:
        await watcher.take()
        watch.changed(AgentChange("a", spec_changed=True))
        watch.reset()
        batch = await watcher.take()
        assert batch is not None and batch.reset and batch.changes == []

        for n in range(MAX_QUEUED_CHANGES + 1):
            watch.changed(AgentChange(f"agent-{n}", spec_changed=True))
        batch = await watcher.take()
        assert batch is not None and batch.reset and batch.changes == []


async def test_closing_ends_every_watch_and_those_opened_after() -> None:
    watch = AgentWatch()
    async with watch.watch() as watcher:
        await watcher.take()
        waiting = asyncio.create_task(watcher.take())
        await asyncio.sleep(0)
        watch.close()
        assert await waiting is None
    async with watch.watch() as late:
        assert await late.take() is None
