"""SIGKILL the memory service while chats run — delegating streams and unary chats — keep it away
several seconds, restart it. Once it is back: every acknowledged input
is in its session's log, every run has exactly one final event and every delegation one response
(the executors' event outbox keeps ends memory did not take), `seq` has no gaps, and the registry
holds no run in flight. Chats started during the outage are refused clearly, never with INTERNAL;
chats started after it work."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.load import assert_told_clearly, chat_load
from tests.faults.processes import Processes

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

# A worker answer of about two seconds (16 chunks, 0.1 s apart), so the kill lands mid-run.
WORKER = {"content": "part " * 200, "delay_seconds": 0.1}
AWAY_SECONDS = 4.0
CHATS = 8


async def test_a_killed_memory_service_loses_no_acknowledged_input_and_leaves_one_end_per_run(
    processes: Processes,
) -> None:
    mesh = processes
    async with chat_load(mesh, "memory-away", worker=[WORKER]) as load:
        await load.wait_started(load.start(CHATS))
        await asyncio.sleep(0.5)  # the worker is answering
        await mesh.memory.kill()
        load.start(CHATS // 2)  # refused while memory is away, or waiting for it
        await asyncio.sleep(AWAY_SECONDS)
        await mesh.memory.start()
        await load.until_answered()
        await load.finish()
        await load.assert_answered(CHATS // 2)
        await load.assert_settles()
        assert_told_clearly(load.outcomes, "memory", mesh.memory.grpc_address)
