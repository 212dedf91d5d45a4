"""A database that is away is told apart from a bug: UNAVAILABLE naming the service's database."""

from __future__ import annotations

import asyncio
import socket

import asyncpg
import asyncpg.exceptions
import grpc
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from agentmesh.runtime.database_errors import (
    DATABASE_POOL_EXHAUSTED,
    DATABASE_UNAVAILABLE,
    database_unavailable,
)


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as error:
            raise RuntimeError("while doing something") from error
    except RuntimeError as error:
        return error


def _refused_by_the_driver() -> BaseException:
    """What asyncpg raises connecting to a port nobody listens on (a server that is down)."""
    with socket.socket() as probe:  # a loopback port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    try:
        asyncio.run(asyncpg.connect(host="127.0.0.1", port=port, user="x", database="x", timeout=10))
    except OSError as error:
        return error
    raise AssertionError("a connection to a closed port succeeded")


@pytest.mark.parametrize(
    "error",
    [
        DBAPIError(
            "SELECT 1",
            {},
            asyncpg.exceptions.ConnectionDoesNotExistError("closed"),
            connection_invalidated=True,
        ),
        _raised_from(_refused_by_the_driver()),
        _raised_from(asyncpg.exceptions.CannotConnectNowError("the database system is starting up")),
        DBAPIError("SELECT 1", {}, asyncpg.exceptions.AdminShutdownError("terminating connection")),
    ],
    ids=["invalidated", "refused", "recovering", "shut-down"],
)
def test_a_lost_or_refused_connection_is_unavailable_naming_the_database(error: BaseException) -> None:
    unavailable = database_unavailable(error, "registry")
    assert unavailable is not None
    assert unavailable.code == grpc.StatusCode.UNAVAILABLE
    assert unavailable.reason == DATABASE_UNAVAILABLE
    assert "registry service's database is unavailable" in str(unavailable)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("a bug"),
        IntegrityError("INSERT", {}, Exception("duplicate key")),
        TimeoutError(),
        _raised_from(ConnectionResetError(104, "reset by a model endpoint, not the database")),
    ],
    ids=["bug", "constraint", "timeout", "another-peer"],
)
def test_other_errors_are_not_taken_for_an_outage(error: BaseException) -> None:
    assert database_unavailable(error, "memory") is None


def test_a_pool_with_no_connection_free_in_time_is_unavailable_not_internal() -> None:
    """SQLAlchemy's pool timeout (a burst of calls holds every connection): the call may be tried
    again, so it leaves as UNAVAILABLE naming the service's database (DATABASE_POOL_EXHAUSTED)."""
    unavailable = database_unavailable(
        _raised_from(PoolTimeout("QueuePool limit of size 10 overflow 10 reached")), "registry"
    )
    assert unavailable is not None
    assert unavailable.code == grpc.StatusCode.UNAVAILABLE
    assert unavailable.reason == DATABASE_POOL_EXHAUSTED
    assert "registry" in unavailable.message and "all in use" in unavailable.message
    assert database_unavailable(_raised_from(TimeoutError("a model endpoint was slow")), "registry") is None
