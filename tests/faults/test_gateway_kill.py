"""SIGKILL the gateway while chats run through it — delegating streams and unary chats — and start
it again (whichever service dies, the gateway too). Every run lost its caller with the
gateway, as if each client had hung up: the executors cancel them, each recording its one end.
Once a gateway is back: every acknowledged input is in its session's log, every run has exactly
one final event and every delegation one response, `seq` has no gaps, and the registry holds no
run in flight. The clients were told their connection broke (never INTERNAL), and chats through
the restarted gateway work."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.load import OUTAGE_CODES, chat_load
from tests.faults.processes import Processes

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

# A worker answer of about two seconds (16 chunks, 0.1 s apart), so the kill lands mid-run.
WORKER = {"content": "part " * 200, "delay_seconds": 0.1}
CHATS = 8


async def test_a_killed_gateway_leaves_one_end_per_run_and_no_run_in_flight(processes: Processes) -> None:
    mesh = processes
    async with chat_load(mesh, "gateway-away", worker=[WORKER]) as load:
        await load.wait_started(load.start(CHATS))
        await asyncio.sleep(0.5)  # the worker is answering
        await mesh.gateway.kill()
        await load.finish()  # every call broke with the gateway
        await mesh.gateway.start()
        await load.until_answered()
        await load.assert_answered(CHATS // 2)
        await load.assert_settles()
    broken = [outcome for outcome in load.outcomes if outcome.error is not None]
    assert broken, "the kill broke no chat (it proved nothing)"
    assert {outcome.error.code() for outcome in broken} <= OUTAGE_CODES, [o.error for o in broken]
