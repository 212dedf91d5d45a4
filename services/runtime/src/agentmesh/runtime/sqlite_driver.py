"""The aiosqlite driver as SQLite engines use it, with a close that cannot wait forever and that
ends the connection's transaction (`_RollingBackConnection`).

aiosqlite runs each connection in a worker thread fed by a queue; `stop()` queues a last item that
closes the sqlite3 connection and ends the thread. Its own `close()` queues the close and then,
in a `finally`, a stop, and awaits both. When a request is cancelled twice while its statement
runs, SQLAlchemy closes the invalidated connection "gracefully" in a shielded task and, on the
second cancellation, force-closes it with `stop()` — the thread ends, and the graceful close's
queued items are never answered. The shielded task then waits forever, and a cancellation at
shutdown only moves it to the `finally`'s wait: `asyncio.run` never returns, so a service on
SQLite would not exit. Here closing is one `stop()`, queued once: the thread closes the connection
after the statement it runs, and a connection whose thread was already told to stop is closed.
"""

from __future__ import annotations

import contextlib
import sqlite3
import types
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi


class _RollingBackConnection(sqlite3.Connection):
    """A sqlite3 connection that ends its transaction when it is closed.

    Closing a connection while a cursor still holds an unfinished statement (a SELECT or a
    RETURNING with rows not yet read) only makes it a "zombie" (`sqlite3_close_v2`): it keeps its
    transaction, and the write lock of a write transaction, until that cursor is freed.
    SQLAlchemy's aiosqlite cursor closes its aiosqlite cursor only when the statement raises an
    `Exception`; a request cancelled while its statement runs leaves it open, and the connection,
    invalidated, is closed behind it. The cursor then lives as long as the cancellation's
    traceback does, and every other connection to the file waits out its busy timeout and fails
    "database is locked" meanwhile. Rolling back first ends the transaction whatever the cursors
    hold; a close does not commit anyway.
    """

    def close(self) -> None:
        # Fails only on a connection already closed or broken, which holds no transaction to end.
        with contextlib.suppress(sqlite3.Error):
            self.rollback()
        super().close()


class _Connection(aiosqlite.Connection):
    async def close(self) -> None:
        if not self._running:
            return  # the thread was told to stop: it closes the connection itself
        stopped = self.stop()
        if stopped is not None:
            await stopped


def _connect(database: str, *, iter_chunk_size: int = 64, **kwargs: Any) -> _Connection:
    connector = partial(sqlite3.connect, str(database), factory=_RollingBackConnection, **kwargs)
    return _Connection(connector, iter_chunk_size)


def dbapi() -> AsyncAdapt_aiosqlite_dbapi:
    """The DB-API module for `create_async_engine(..., module=dbapi())`: aiosqlite's, connecting
    through `_connect`."""
    module = types.ModuleType("aiosqlite")
    module.__dict__.update(vars(aiosqlite))
    module.connect = _connect  # type: ignore[attr-defined]
    return AsyncAdapt_aiosqlite_dbapi(module, sqlite3)
