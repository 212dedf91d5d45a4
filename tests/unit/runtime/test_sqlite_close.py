"""Closing SQLite connections under cancellation (runtime/sqlite_driver.py).

A SQLite engine whose requests were cancelled twice mid-statement still closes, and the process
exits: with aiosqlite's own close, SQLAlchemy's shielded graceful close waited forever on a worker
thread its force close had stopped, and `asyncio.run` never returned.

A write transaction whose request is cancelled while a statement with rows runs ends when its
connection is closed: the cursor left holding that statement kept the closed connection's write
lock until the cursor was freed, and every other writer failed "database is locked"; a read
cancelled so kept its snapshot, and the WAL could not be reset."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# What both scenarios start with: a SQL function `blocking()` (registered on each connection by
# `blocking_engine`) that holds its statement until `release` is set, saying so on `inside`.
_BLOCKING = """
import asyncio, gc, sqlite3, sys, threading
from sqlalchemy import event, text
from agentmesh.runtime.database import create_engine

inside = threading.Semaphore(0)
release = threading.Event()

def blocking() -> int:
    inside.release()
    release.wait()
    return 1

def blocking_engine(path: str):
    engine = create_engine("sqlite:///" + path)
    register = lambda connection, _: connection.create_function("blocking", 0, blocking)
    event.listen(engine.sync_engine, "connect", register)
    return engine
"""

# Three statements each block inside a SQL function until released. Each request is cancelled
# while its statement runs, and again once SQLAlchemy has begun closing its invalidated connection
# gracefully (the second cancellation makes it force-close: aiosqlite's `stop()`); only then are
# the statements let go, and the engine disposed.
_SCENARIO = (
    _BLOCKING
    + """
async def request(engine) -> None:
    async with engine.connect() as connection:
        await connection.execute(text("SELECT blocking()"))

def closing() -> int:
    return sum("graceful_close" in task.get_coro().__qualname__ for task in asyncio.all_tasks())

async def main() -> None:
    engine = blocking_engine(sys.argv[1])
    async with engine.connect() as connection:  # the database file made and in WAL mode first
        await connection.execute(text("SELECT 1"))
    requests = [asyncio.create_task(request(engine)) for _ in range(3)]
    for _ in requests:
        await asyncio.to_thread(inside.acquire)
    for task in requests:
        task.cancel()
    while closing() < len(requests):  # SQLAlchemy closes each invalidated connection "gracefully"
        await asyncio.sleep(0)
    await asyncio.sleep(0)  # ... and those closes have started: each queued its close behind the statement
    for task in requests:
        task.cancel()
    await asyncio.gather(*requests, return_exceptions=True)  # each connection force-closed
    release.set()  # only now the statements end, and the graceful closes' items are answered
    await engine.dispose()

asyncio.run(main())
print("exited")
"""
)


def test_a_process_whose_requests_were_cancelled_twice_mid_statement_exits(tmp_path: Path) -> None:
    database = tmp_path / "cancelled.db"
    scenario = [sys.executable, "-c", _SCENARIO, str(database)]
    result = subprocess.run(scenario, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exited"


# A request cancelled while its SELECT runs (held in a SQL function until the cancellation landed):
# in a write transaction, or alone in autocommit mode. The cursor SQLAlchemy's aiosqlite adapter
# leaves open then still holds the unfinished statement when the invalidated connection is closed.
# Garbage collection is off, as it is for as long as nothing lets go of the cancellation: what the
# closed connection keeps must not depend on when that happens. Another connection then asks for
# the write lock without waiting, or writes and resets the WAL (which a live reader prevents).
_CANCELLED_MID_STATEMENT = (
    _BLOCKING
    + """
path, mode = sys.argv[1], sys.argv[2]

async def request(engine) -> None:
    if mode == "write":
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t VALUES (1)"))  # the write lock taken
            await connection.execute(text("SELECT blocking() FROM t"))
    else:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
            await connection.execute(text("SELECT blocking() FROM t"))

async def main() -> None:
    engine = blocking_engine(path)
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (x INTEGER)"))
        await connection.execute(text("INSERT INTO t VALUES (0), (0)"))
    gc.disable()
    task = asyncio.create_task(request(engine))
    await asyncio.to_thread(inside.acquire)
    task.cancel()
    release.set()
    await asyncio.gather(task, return_exceptions=True)  # returns once its connection is closed
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        if mode == "write":
            other.execute("BEGIN IMMEDIATE")
            print("writable")
        else:
            other.execute("INSERT INTO t VALUES (2)")
            busy = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            print("WAL reset" if busy == 0 else "WAL kept by a reader")
    except sqlite3.OperationalError as error:
        print(error)
    finally:
        other.close()
    await engine.dispose()

asyncio.run(main())
"""
)


def _cancelled_mid_statement(database: Path, mode: str) -> str:
    scenario = [sys.executable, "-c", _CANCELLED_MID_STATEMENT, str(database), mode]
    result = subprocess.run(scenario, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_write_cancelled_mid_statement_leaves_the_database_writable(tmp_path: Path) -> None:
    assert _cancelled_mid_statement(tmp_path / "cancelled-write.db", "write") == "writable"


def test_a_read_cancelled_mid_statement_leaves_no_reader_behind(tmp_path: Path) -> None:
    assert _cancelled_mid_statement(tmp_path / "cancelled-read.db", "read") == "WAL reset"
