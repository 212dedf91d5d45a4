"""The database fixtures give real, isolated databases on both backends."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.postgres import OWNER_FILE, ROOT_PREFIX, PostgresServer, asyncpg_url, find_bin_dir, libpq_dsn


@pytest.mark.postgres
async def test_postgres_url_is_a_postgresql_15_server(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+asyncpg://")
    connection = await asyncpg.connect(postgres_url.replace("+asyncpg", "", 1))
    try:
        version = await connection.fetchval("select version()")
    finally:
        await connection.close()
    assert "PostgreSQL 15" in version


@pytest.mark.postgres
async def test_postgres_database_is_a_new_empty_database(postgres_url: str, postgres_database: str) -> None:
    connection = await asyncpg.connect(libpq_dsn(postgres_database))
    try:
        name = await connection.fetchval("select current_database()")
        tables = await connection.fetchval(
            "select count(*) from information_schema.tables where table_schema = 'public'"
        )
    finally:
        await connection.close()
    assert name.startswith("agentmesh_test_")
    assert name != libpq_dsn(postgres_url).rsplit("/", 1)[1]
    assert tables == 0


async def test_database_url_runs_sql_through_sqlalchemy(database_url: str) -> None:
    engine = create_async_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("create table agents (id integer primary key, name text not null)"))
            await connection.execute(
                text("insert into agents (id, name) values (:id, :name)"),
                [{"id": 1, "name": "planner"}, {"id": 2, "name": "coder"}],
            )
        async with engine.connect() as connection:
            rows = (await connection.execute(text("select id, name from agents order by id"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in rows] == [(1, "planner"), (2, "coder")]


async def test_database_url_starts_empty_for_every_test(database_url: str) -> None:
    # The previous test created `agents`; a fresh database per test must not have it.
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            names = await connection.run_sync(lambda sync: inspect(sync).get_table_names())
    finally:
        await engine.dispose()
    assert names == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql+asyncpg://u:p@h:5432/db"),
        ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
    ],
)
def test_configured_urls_are_normalized_to_asyncpg(given: str, expected: str) -> None:
    assert asyncpg_url(given) == expected
    assert libpq_dsn(given) == expected.replace("+asyncpg", "")


@pytest.mark.postgres
def test_a_server_whose_test_run_was_killed_is_stopped_and_removed_by_the_next() -> None:
    """A test run killed before it stopped its throwaway server (pg_ctl leaves the server running
    on its own) does not leave it running: the next server started finds it and removes it."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries not found")
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from tests.postgres import PostgresServer; "
            "server = PostgresServer(Path(sys.argv[1])); server.start(); "
            "print(server.port, server.url, flush=True); time.sleep(600)",
            str(bin_dir),
        ],
        cwd=Path(__file__).parent.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        port = int(owner.stdout.readline().split()[0])
    finally:
        owner.kill()
        owner.wait()
    roots = _roots_of(owner.pid)
    assert len(roots) == 1 and _listening(port)  # killed, its server goes on

    server = PostgresServer(bin_dir)
    try:
        server.start()
        assert not roots[0].exists()
        assert not _listening(port)
    finally:
        server.stop()


def _roots_of(pid: int) -> list[Path]:
    """The throwaway server folders the process `pid` made."""
    return [
        root
        for root in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*")
        if _read(root / OWNER_FILE) == str(pid)
    ]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
