"""A SQLite query cancelled while it runs, twice (a caller's deadline, then its service
stopping), must not keep the process from exiting. With aiosqlite 0.22 it did: SQLAlchemy
invalidates the connection and closes it gracefully in a shielded task; the second cancel
force-stops the connection's worker thread, and the graceful close then waits forever for a
thread that is gone — `asyncio.run` never returns (a test session hung at teardown this way).
The scenario runs in a process of its own, so a hang fails this test instead of hanging the
suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCENARIO = """
import asyncio, sys
from sqlalchemy import text
from agentmesh.runtime.database import create_engine

# Long enough to be running when it is cancelled.
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000) SELECT count(*) FROM c"
)

async def main(url):
    engine = create_engine(url)

    async def query():
        async with engine.connect() as connection:
            await connection.execute(text(SLOW))

    for _ in range(3):
        task = asyncio.create_task(query())
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.sleep(0.02)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await engine.dispose()

asyncio.run(main(sys.argv[1]))
print("exited")
"""


def test_a_query_cancelled_twice_lets_the_process_exit(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cancelled.db'}"
    try:
        finished = subprocess.run(
            [sys.executable, "-c", SCENARIO, url], capture_output=True, text=True, timeout=90, check=False
        )
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(f"the process did not exit within 90 s: {hung.stderr!r}") from None
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip() == "exited"
