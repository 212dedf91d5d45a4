"""Restart PostgreSQL (`pg_ctl restart -m immediate`) under load — delegating streams and unary
chats. Registry and memory reconnect by themselves; once the database
is back every acknowledged input is in its session's log, every run has exactly one final event
and every delegation one response, `seq` has no gaps, and the registry holds no run in flight. A
client is never told INTERNAL, nor the database's address: a clear UNAVAILABLE at most."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url

from tests.faults.load import assert_told_clearly, chat_load
from tests.faults.processes import Processes
from tests.postgres import PostgresServer, PostgresUnavailable, find_bin_dir, skip_or_fail

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

# A worker answer of about two seconds (16 chunks, 0.1 s apart), so the restart lands mid-run.
WORKER = {"content": "part " * 200, "delay_seconds": 0.1}
CHATS = 8
DOWN_SECONDS = 3.0  # the second outage: stopped, then started again after this long


@pytest.fixture
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, since the test restarts it."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        skip_or_fail(
            str(PostgresUnavailable("no PostgreSQL binaries: this test restarts a server of its own"))
        )
    # Durable: the suite's server does not flush commits, and a crash would lose acknowledged ones.
    server = PostgresServer(bin_dir, durable=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture
async def mesh(postgres_server: PostgresServer, tmp_path: Path) -> AsyncIterator[Processes]:
    processes = Processes(postgres_server.url, tmp_path)
    try:
        await processes.start()
        yield processes
    finally:
        await processes.stop()


async def test_a_postgres_restart_under_load_loses_no_acknowledged_input_and_leaves_one_end_per_run(
    postgres_server: PostgresServer, mesh: Processes
) -> None:
    async with chat_load(mesh, "postgres-restart", worker=[WORKER]) as load:
        # pg_ctl runs in this thread: forked from another one, next to gRPC's threads, it
        # crashed. The restart blocks this test's loop for its second or so; the chats in
        # flight in the services go on meanwhile.
        for outage in ("restart", "stop and start"):
            await load.wait_started(load.start(CHATS))
            await asyncio.sleep(0.5)  # the worker is answering
            load.start(CHATS // 2)
            await asyncio.sleep(0.1)  # their requests reach the gateway
            if outage == "restart":
                postgres_server.restart()
            else:
                postgres_server.crash()
                load.start(CHATS // 2)  # while the database is away
                await asyncio.sleep(DOWN_SECONDS)
                postgres_server.start_again()
            await load.until_answered()
            await load.finish()
        await load.assert_answered(CHATS // 2)
        await load.assert_settles()
        database = make_url(postgres_server.url)
        assert_told_clearly(
            load.outcomes,
            "database",
            f"{database.host}:{database.port}",
            mesh.registry.grpc_address,
            mesh.memory.grpc_address,
        )
        # Both stateful services lived through it (they reconnected; nothing restarted them).
        assert mesh.registry.running and mesh.memory.running
