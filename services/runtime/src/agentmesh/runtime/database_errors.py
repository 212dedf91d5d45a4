"""A database that is away — restarting, refusing connections, cutting them — told apart from a
bug: a call that fails because of it leaves as UNAVAILABLE naming the service's database (the
caller's channel retries it, and a client knows to try again), never as INTERNAL.

SQLAlchemy marks the errors its dialect recognises as a lost connection (`connection_invalidated`)
and invalidates the pool with them, so the next checkout connects afresh: after a PostgreSQL
restart each process fails the calls that held a connection at that moment, and no more. A
connection that cannot be made while the server is down or recovering surfaces as the driver's
error (refused, "not yet accepting connections"), found here along the exception's causes. A
bare `ConnectionError` counts only when a database driver raised it (its traceback passes
through the driver or SQLAlchemy): the same error from a model endpoint, an MCP server or a bug
is not the database's, and must not be blamed on it.

A call that waited the pool timeout (`database.POOL_TIMEOUT_SECONDS`, 30 s, unless the service
sets its own) for a connection while every pooled one was in use leaves as UNAVAILABLE too, reason
DATABASE_POOL_EXHAUSTED: the database is there but busy, and trying again later may succeed.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentmesh.runtime.errors import PEER_SERVICE, Unavailable

DATABASE_UNAVAILABLE = "DATABASE_UNAVAILABLE"
DATABASE_POOL_EXHAUSTED = "DATABASE_POOL_EXHAUSTED"
# SQLSTATE classes of a server that is gone or not ready: 08 connection exception, 57P01-03
# admin/crash shutdown and "cannot connect now" (starting, recovering).
_UNAVAILABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03")
# Where database errors are raised: the drivers and SQLAlchemy.
_DATABASE_MODULES = ("asyncpg", "aiosqlite", "sqlite3", "sqlalchemy")


def database_unavailable(error: BaseException, service: str) -> Unavailable | None:
    """The UNAVAILABLE `error` stands for when it means `service`'s database is away, or its
    connection pool stayed exhausted for the pool's timeout, else None."""
    causes = list(_causes(error))
    if any(_is_pool_timeout(cause) for cause in causes):
        return Unavailable(
            f"the {service} service's database connections are all in use (no connection of its "
            "pool came free within the pool timeout); try again",
            reason=DATABASE_POOL_EXHAUSTED,
            metadata={PEER_SERVICE: service},
        )
    if not any(_is_connection_loss(cause) for cause in causes):
        return None
    return Unavailable(
        f"the {service} service's database is unavailable (restarting or unreachable); try again",
        reason=DATABASE_UNAVAILABLE,
        metadata={PEER_SERVICE: service},
    )


def _is_pool_timeout(error: BaseException) -> bool:
    # SQLAlchemy's own TimeoutError (QueuePool limit reached), by duck typing as above; not the
    # builtin TimeoutError, which a call's own deadline raises.
    return type(error).__name__ == "TimeoutError" and type(error).__module__.startswith("sqlalchemy")


def _is_connection_loss(error: BaseException) -> bool:
    # SQLAlchemy's DBAPIError, by duck typing: the gateway and executor do not import SQLAlchemy.
    if getattr(error, "connection_invalidated", False) is True:
        return True
    if isinstance(error, ConnectionError):  # refused, reset, aborted: by a driver only
        return _raised_by_a_driver(error)
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate.startswith(_UNAVAILABLE_SQLSTATES):
        return True
    # asyncpg's InterfaceError for a connection it already knows is closed has no SQLSTATE.
    return type(error).__name__ == "InterfaceError" and "connection is closed" in str(error)


def _raised_by_a_driver(error: BaseException) -> bool:
    traceback = error.__traceback__
    while traceback is not None:
        module = traceback.tb_frame.f_globals.get("__name__", "")
        if module.partition(".")[0] in _DATABASE_MODULES:
            return True
        traceback = traceback.tb_next
    return False


def _causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it (`__cause__`, `__context__`, SQLAlchemy's `orig`), once each."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__, getattr(current, "orig", None)]
