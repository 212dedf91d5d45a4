"""Fixtures shared by the whole suite.

Databases: `database_url` runs a test once on SQLite and once on PostgreSQL; `postgres_database`
gives one fresh PostgreSQL database; `postgres_url` is the session's PostgreSQL server itself.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import ServiceProcess
from tests.postgres import PostgresUnavailable, fresh_database, postgres_server_url, skip_or_fail


def pytest_configure(config: pytest.Config) -> None:
    # The CLI keeps its sign-in in the user's config directory: the suite's own, so that no test
    # reads a developer's credentials (a signed-in CLI is not anonymous) or writes over them.
    os.environ["AGENTMESH_CONFIG_DIR"] = tempfile.mkdtemp(prefix="agentmesh-tests-config-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deals the tests marked `long` out first, one to each worker. pytest-xdist's work stealing
    hands each worker a block of consecutive tests and lets an idle worker take the back half of
    a busy one's queue, so a long test in the middle of a block starts whenever its worker reaches
    it, and the last one to start ends the run alone. Every worker computes the same order (xdist
    refuses different collections): the long tests, longest first, each to the front of the block
    (of those xdist will cut) with the least long work so far; the rest keep their order."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    long = sorted(
        (item for item in items if item.get_closest_marker("long")),
        key=lambda item: -item.get_closest_marker("long").args[0],
    )
    if workers < 2 or not long:
        return
    rest = iter([item for item in items if not item.get_closest_marker("long")])
    firsts: list[list[pytest.Item]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers
    for item in long:  # each to the block with the least long work so far
        worker = seconds.index(min(seconds))
        firsts[worker].append(item)
        seconds[worker] += item.get_closest_marker("long").args[0]
    ordered, remaining = [], len(items)
    for worker in range(workers):
        size = remaining // (workers - worker)  # the block xdist's first distribution gives it
        remaining -= size
        ordered += firsts[worker] + [next(rest) for _ in range(max(0, size - len(firsts[worker])))]
    items[:] = ordered + list(rest)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A failing test that ran services as processes shows their last log lines: what a CI run's
    output is the only record of."""
    report: pytest.TestReport = yield
    if report.failed:
        for process in ServiceProcess.started:
            report.sections.append((f"{process.name} (pid {process.pid}), {report.when}", process.output()))
    if report.when == "teardown":
        ServiceProcess.started.clear()
    return report


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """`postgresql+asyncpg://` URL of a superuser connection to the session's PostgreSQL server.

    The server named by AGENTMESH_TEST_DATABASE_URL, else a throwaway one started from the local
    binaries and removed at session end. Under pytest-xdist every worker is a session of its own,
    so each worker has its own server: tests that restart or load it touch no other worker's.
    Skips when neither exists; fails instead under CI=true.
    Tests should not write to it directly: ask for `postgres_database` or `database_url`.
    """
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server_url())
        except PostgresUnavailable as exc:
            skip_or_fail(str(exc))
        yield url


@pytest.fixture
async def postgres_database(postgres_url: str) -> AsyncIterator[str]:
    """`postgresql+asyncpg://` URL of a new, empty database of its own, dropped after the test."""
    async with fresh_database(postgres_url) as url:
        yield url


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """SQLAlchemy async URL of an empty database, once per backend: a SQLite file, then PostgreSQL.

    Asking for it runs the test on both; `-m "not postgres"` deselects the PostgreSQL run.
    """
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'test.db'}"
    # Requested lazily so that the SQLite run never needs (or skips for want of) a PostgreSQL server.
    return request.getfixturevalue("postgres_database")


@pytest.fixture(
    params=[
        pytest.param("in-memory", id="in-memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def store_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """For store contract suites: each implementation's database in turn — none (the in-memory
    store), a SQLite file, then PostgreSQL."""
    if request.param == "in-memory":
        return None
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_database")


@pytest.fixture(scope="session")
def _span_exporter():
    """One in-memory exporter for the test process (a tracer provider can be installed once)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentmesh.runtime.telemetry import configure_tracing

    exporter = InMemorySpanExporter()
    configure_tracing("agentmesh-tests", processors=[SimpleSpanProcessor(exporter)])
    return exporter


@pytest.fixture
def spans(_span_exporter):
    """The in-memory span exporter, emptied for this test."""
    _span_exporter.clear()
    yield _span_exporter
    _span_exporter.clear()
