"""The aiosqlite driver as SQLite engines use it, with a close that cannot wait forever and that
leaves nothing of the connection behind (`_ClosingConnection`).

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
import weakref
from functools import partial
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi


class _ClosingConnection(sqlite3.Connection):
    """A sqlite3 connection that, closed, is closed: its cursors first, and its transaction ended.

    Closing a connection while a cursor still holds an unfinished statement (a SELECT or a
    RETURNING with rows not yet read) only makes it a "zombie" (`sqlite3_close_v2`): it keeps its
    transaction, and the write lock of a write transaction, until that cursor is freed; a zombie
    reader outside a transaction keeps its snapshot, and the WAL cannot be reset behind it.
    SQLAlchemy's aiosqlite cursor closes its aiosqlite cursor only when the statement raises an
    `Exception`; a request cancelled while its statement runs leaves it open, and the connection,
    invalidated, is closed behind it. The cursor then lives as long as the cancellation's
    traceback does, and every other connection to the file waits out its busy timeout and fails
    "database is locked" meanwhile. So the cursors made here are closed first; the rollback ends
    the transaction whatever a cursor made elsewhere (`Connection.execute`) holds — a close does
    not commit anyway.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()

    def cursor(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        cursor = super().cursor(*args, **kwargs)
        self._cursors.add(cursor)
        return cursor

    def close(self) -> None:
        # Each fails only on a connection already closed or broken, which has nothing left to end.
        for cursor in list(self._cursors):
            with contextlib.suppress(sqlite3.Error):
                cursor.close()
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
    connector = partial(sqlite3.connect, str(database), factory=_ClosingConnection, **kwargs)
    return _Connection(connector, iter_chunk_size)


def dbapi() -> AsyncAdapt_aiosqlite_dbapi:
    """The DB-API module for `create_async_engine(..., module=dbapi())`: aiosqlite's, connecting
    through `_connect`."""
    module = types.ModuleType("aiosqlite")
    module.__dict__.update(vars(aiosqlite))
    module.connect = _connect  # type: ignore[attr-defined]
    return AsyncAdapt_aiosqlite_dbapi(module, sqlite3)
