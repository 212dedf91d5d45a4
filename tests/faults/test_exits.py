"""Every service exits cleanly on SIGTERM while chats run: each process of the mesh in turn gets
SIGTERM, drains, and must exit with code 0 — no crash on the way out (a crash is a death by a
signal: a gRPC thread's segfault is SIGSEGV, code -11, whether or not a core file is written), no
hang past its drain (SIGKILL after 30 s, code -9); then it starts again and the next one goes.
Afterwards every chat's invariants hold (`tests/faults/load.py`). One round here;
`AGENTMESH_TEST_EXIT_ROUNDS=50` runs the fifty docs/reliability.md records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.load import chat_load
from tests.faults.processes import running

ROUNDS = int(os.environ.get("AGENTMESH_TEST_EXIT_ROUNDS", "1"))

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.timeout(120 + 60 * ROUNDS),
    pytest.mark.long(25),
]

# A few seconds a chat: SIGTERMs land while runs are in flight.
WORKER = [{"content": "part " * 60, "delay_seconds": 0.1}]


async def test_every_service_exits_cleanly_on_sigterm_while_chats_run(
    postgres_database: str, tmp_path: Path
) -> None:
    exits: dict[str, list[int | None]] = {}
    async with (
        running(postgres_database, tmp_path, AGENTMESH_EXECUTOR_SHUTDOWN_GRACE_SECONDS="0.5") as mesh,
        chat_load(mesh, "exits", worker=WORKER) as load,
    ):
        for _ in range(ROUNDS):
            for process in mesh.services:
                load.start(2)
                exits.setdefault(process.name, []).append(await process.stop(timeout=30))
                await process.start()
                await process.wait_serving()
        unclean = {name: codes for name, codes in exits.items() if codes != [0] * ROUNDS}
        assert unclean == {}, f"exit codes other than 0 (-11: SIGSEGV, -9: killed after 30 s): {unclean}"
        assert sorted(exits) == ["executor-0", "executor-1", "gateway", "memory", "registry"]
        await load.finish()
        await load.assert_settles()
