"""A database that is away is told apart from a bug: UNAVAILABLE naming the service's database."""

from __future__ import annotations

import asyncpg.exceptions
import grpc
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError

from agentmesh.runtime.database_errors import DATABASE_UNAVAILABLE, database_unavailable


def _raised_from(cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as error:
            raise RuntimeError("while doing something") from error
    except RuntimeError as error:
        return error


@pytest.mark.parametrize(
    "error",
    [
        DBAPIError(
            "SELECT 1",
            {},
            asyncpg.exceptions.ConnectionDoesNotExistError("closed"),
            connection_invalidated=True,
        ),
        _raised_from(ConnectionRefusedError(111, "Connection refused")),
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
    [ValueError("a bug"), IntegrityError("INSERT", {}, Exception("duplicate key")), TimeoutError()],
    ids=["bug", "constraint", "timeout"],
)
def test_other_errors_are_not_taken_for_an_outage(error: BaseException) -> None:
    assert database_unavailable(error, "memory") is None
