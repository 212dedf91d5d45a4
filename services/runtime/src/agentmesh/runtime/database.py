"""Async SQLAlchemy engines and Alembic migrations, for SQLite (embedded) and PostgreSQL.

Each stateful service keeps its migrations in its own `migrations/` package, with its own version
table, so registry and memory can share one PostgreSQL database or use separate ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentmesh.runtime import sqlite_driver

logger = logging.getLogger(__name__)


def _drop_driver_call_records(record: logging.LogRecord) -> bool:
    """aiosqlite logs every call it runs at DEBUG with its arguments — a statement's bound
    parameters, hence any secret being stored. Its records below INFO are dropped whatever level
    an operator sets (a filter on its logger, so a later `setLevel` cannot bring them back)."""
    return record.levelno >= logging.INFO


_aiosqlite_logger = logging.getLogger("aiosqlite")
_aiosqlite_logger.setLevel(logging.INFO)
_aiosqlite_logger.addFilter(_drop_driver_call_records)


def normalize_url(url: str) -> str:
    """Accepts `postgresql://` and `sqlite://` URLs and picks the async drivers."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif parsed.drivername == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    return parsed.render_as_string(hide_password=False)


# How long a call waits for a pooled connection when all are in use (SQLAlchemy's default); past
# it the call fails UNAVAILABLE, DATABASE_POOL_EXHAUSTED (database_errors.py).
POOL_TIMEOUT_SECONDS = 30.0


def create_engine(
    url: str, *, pool_size: int = 10, pool_timeout_seconds: float = POOL_TIMEOUT_SECONDS
) -> AsyncEngine:
    """An engine that never renders bound parameters, in its statement log (should an operator
    enable `sqlalchemy.engine`) or in the text of a database error: they may be secrets. On
    PostgreSQL it holds up to `pool_size` connections, and as many again under bursts."""
    url = normalize_url(url)
    if make_url(url).get_backend_name() == "sqlite":
        # aiosqlite through a close that cannot wait forever on a stopped thread (sqlite_driver.py)
        engine = create_async_engine(url, hide_parameters=True, module=sqlite_driver.dbapi())
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # No pre-ping: it costs a round trip on every checkout (every append); connections are
    # recycled instead, and a connection broken by a server restart fails one call, not all.
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=pool_timeout_seconds,
        pool_recycle=1800,
        hide_parameters=True,
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


async def upgrade(engine: AsyncEngine, migrations: Path, *, version_table: str) -> None:
    """Applies a service's migrations up to head, inside one connection. Alembic's own INFO lines
    are silenced (`runtime.logging`); one line says what changed, when something did."""

    def revision(connection: Connection) -> str | None:
        return MigrationContext.configure(
            connection, opts={"version_table": version_table}
        ).get_current_revision()

    def run(connection: Connection) -> None:
        if connection.dialect.name == "postgresql":
            # Replicas starting together take turns: the lock is held until this transaction ends.
            connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": version_table})
        config = Config()
        config.set_main_option("script_location", str(migrations))
        config.attributes["connection"] = connection
        config.attributes["version_table"] = version_table
        before = revision(connection)
        command.upgrade(config, "head")
        after = revision(connection)
        if after != before:
            logger.info("migrated %s from %s to %s", version_table, before or "an empty database", after)

    async with engine.begin() as connection:
        await connection.run_sync(run)


def run_migrations(target_metadata: Any) -> None:
    """The body of every service's `migrations/env.py` (online mode, connection given)."""
    from alembic import context

    connection = context.config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=context.config.attributes["version_table"],
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def create_sqlite_directory(database_url: str) -> None:
    """Creates the folder of a SQLite database file: SQLite creates the file but not its folder.
    Does nothing for other databases."""
    url = make_url(normalize_url(database_url))
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
