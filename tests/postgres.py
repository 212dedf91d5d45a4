"""A throwaway PostgreSQL server for the test suite, started from the local PostgreSQL binaries.

`AGENTMESH_TEST_DATABASE_URL` names an existing server instead. Without either, PostgreSQL tests
skip with the reason — except under `CI=true`, where they fail: CI must not pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import NoReturn

import asyncpg
import pytest
from sqlalchemy.engine import URL, make_url

from tests.ports import free_loopback_port

DATABASE_URL_ENV = "AGENTMESH_TEST_DATABASE_URL"
# Debian installs initdb/pg_ctl here rather than on PATH.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
# PostgreSQL refuses to run as root; as root the server runs as this user.
UNPRIVILEGED_USER = "postgres"
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
    "-c full_page_writes=off -c max_connections=200"
)
# What `durable=True` adds: a server that is crashed on purpose must keep what it acknowledged.
DURABLE_OPTIONS = "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
START_TIMEOUT_SECONDS = 60
START_ATTEMPTS = 3
# Each throwaway server lives in a temporary folder of this prefix, with its owner's pid in it.
ROOT_PREFIX = "agentmesh-pg-"
OWNER_FILE = "owner.pid"


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be had here: no URL given and no binaries found."""


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the requesting test, or fail it under CI, where every backend must be tested."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason} (CI=true: PostgreSQL tests must run in CI)", pytrace=False)
    pytest.skip(reason)


def asyncpg_url(url: str) -> str:
    """Any PostgreSQL URL (`postgres://`, `postgresql://`, `postgresql+driver://`) for SQLAlchemy asyncpg."""
    return _render(make_url(_canonical_scheme(url)).set(drivername="postgresql+asyncpg"))


def libpq_dsn(url: str) -> str:
    """The same URL without the SQLAlchemy driver suffix, as `asyncpg.connect` takes it."""
    return _render(make_url(_canonical_scheme(url)).set(drivername="postgresql"))


def find_bin_dir() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: from PATH, else the newest Debian install."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        # Debian's /usr/bin wrappers and hand-made symlinks point into the real bin directory,
        # which also holds the matching `postgres` and `pg_isready`.
        return Path(initdb).resolve().parent
    candidates = [p for p in Path("/").glob(DEBIAN_BIN_GLOB.lstrip("/")) if _has_server_tools(p)]
    if not candidates:
        return None
    return max(candidates, key=lambda p: _version_key(p.parent.name))


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory, listening on a free loopback port.

    Owns the directory and the server process: `start()` creates both, `stop()` removes both.
    """

    def __init__(self, bin_dir: Path, *, durable: bool = False) -> None:
        """`durable`: commits are flushed as in production (the suite's server trades that for
        speed, and would lose acknowledged commits when crashed: `restart`, `crash`)."""
        self._bin_dir = bin_dir
        self._durable = durable
        self._run_as = _unprivileged_user() if os.geteuid() == 0 else None
        self._root: Path | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the `postgres` database as the `postgres` superuser (trust auth)."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._reap_abandoned()
        self._root = Path(tempfile.mkdtemp(prefix=ROOT_PREFIX))
        # Whose server it is: a test run killed before it could stop its server leaves this
        # behind, and the next run that finds its owner gone stops the server and removes it.
        (self._root / OWNER_FILE).write_text(str(os.getpid()))
        if self._run_as is not None:
            os.chown(self._root, self._run_as.pw_uid, self._run_as.pw_gid)
        self._run(
            "initdb",
            "--pgdata",
            str(self._data_dir),
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        self._socket_dir.mkdir()
        if self._run_as is not None:
            os.chown(self._socket_dir, self._run_as.pw_uid, self._run_as.pw_gid)
        # Another process may take the free port between our probe and the server's bind.
        for attempt in range(1, START_ATTEMPTS + 1):
            self.port = free_loopback_port()
            try:
                self._start_server()
                return
            except RuntimeError:
                if attempt == START_ATTEMPTS:
                    raise

    def stop(self) -> None:
        if self._root is None:
            return
        try:
            if (self._data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "--pgdata", str(self._data_dir), "--mode=immediate", "--wait")
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _reap_abandoned(self) -> None:
        """Stops and removes the servers of test runs that died without stopping them."""
        for root in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*"):
            try:
                owner = int((root / OWNER_FILE).read_text())
            except (OSError, ValueError):
                continue  # being made right now, or not one of ours
            if _alive(owner):
                continue
            data = root / "data"
            if (data / "postmaster.pid").exists():
                with contextlib.suppress(RuntimeError):  # stopped by another run meanwhile
                    self._run("pg_ctl", "stop", "--pgdata", str(data), "--mode=immediate", "--wait")
            shutil.rmtree(root, ignore_errors=True)

    def restart(self) -> None:
        """`pg_ctl restart -m immediate`: every connection is cut at once, the server recovers
        from its WAL as after a crash, and listens again on the same port (fault tests)."""
        try:
            self._run(
                "pg_ctl",
                "restart",
                "--pgdata",
                str(self._data_dir),
                "--mode=immediate",
                "--log",
                str(self._log_file),
                "--wait",
                f"--timeout={START_TIMEOUT_SECONDS}",
            )
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\nserver log:\n{self._log_tail()}") from exc
        self._wait_ready()

    def crash(self) -> None:
        """`pg_ctl stop -m immediate`, keeping the data: `start_again` recovers it as after a crash."""
        self._run("pg_ctl", "stop", "--pgdata", str(self._data_dir), "--mode=immediate", "--wait")

    def start_again(self) -> None:
        """Starts the server stopped by `crash` on the same port."""
        self._start_server()

    @property
    def _data_dir(self) -> Path:
        assert self._root is not None
        return self._root / "data"

    @property
    def _socket_dir(self) -> Path:
        assert self._root is not None
        return self._root / "sock"

    @property
    def _log_file(self) -> Path:
        assert self._root is not None
        return self._root / "server.log"

    def _start_server(self) -> None:
        options = f"-p {self.port} -k {self._socket_dir} {SERVER_OPTIONS}"
        if self._durable:
            options += f" {DURABLE_OPTIONS}"  # the later setting wins
        try:
            self._run(
                "pg_ctl",
                "start",
                "--pgdata",
                str(self._data_dir),
                "--log",
                str(self._log_file),
                "--options",
                options,
                "--wait",
                f"--timeout={START_TIMEOUT_SECONDS}",
            )
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\nserver log:\n{self._log_tail()}") from exc
        self._wait_ready()

    def _wait_ready(self) -> None:
        # `pg_ctl --wait` already waits for "ready" in postmaster.pid; pg_isready confirms that the
        # server accepts connections on the TCP address the tests use.
        pg_isready = self._bin_dir / "pg_isready"
        if not pg_isready.exists():
            return
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        command = [str(pg_isready), "--host=127.0.0.1", f"--port={self.port}", "--username=postgres"]
        while subprocess.run(command, capture_output=True, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not accept connections within {START_TIMEOUT_SECONDS}s")
            time.sleep(0.1)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self._bin_dir / tool), *args]
        user = self._run_as
        setpriv = shutil.which("setpriv") if user else None
        switch: dict[str, object] = {}
        if user and setpriv:
            # A fresh process drops to the user: Python's own switch (setuid between fork and exec)
            # crashed the child with SIGSEGV once the test process ran gRPC's threads (the
            # PostgreSQL restart fault test).
            command = [
                setpriv,
                f"--reuid={user.pw_uid}",
                f"--regid={user.pw_gid}",
                "--clear-groups",
                *command,
            ]
        elif user:
            switch = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        result = subprocess.run(
            command,
            cwd=self._root,
            env=_server_env(),
            **switch,  # type: ignore[arg-type]
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            who = f" as {user.pw_name}" if user else ""
            raise RuntimeError(
                f"{' '.join(command)}{who} exited with {result.returncode}:\n{result.stdout}{result.stderr}"
            )

    def _log_tail(self) -> str:
        try:
            return "\n".join(self._log_file.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def postgres_server_url() -> Iterator[str]:
    """Yield the SQLAlchemy URL of a server: the one the environment names, else a throwaway one."""
    configured = os.environ.get(DATABASE_URL_ENV, "").strip()
    if configured:
        yield asyncpg_url(configured)
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable(
            f"PostgreSQL not found: no initdb/pg_ctl on PATH or in {DEBIAN_BIN_GLOB}, "
            f"and {DATABASE_URL_ENV} is not set (install postgresql-15 or set it)"
        )
    server = PostgresServer(bin_dir)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def fresh_database(server_url: str) -> AsyncIterator[str]:
    """Create a uniquely named database on the server, yield its URL, and drop it afterwards."""
    name = f"agentmesh_test_{uuid.uuid4().hex[:16]}"
    async with _connection(server_url) as connection:
        await connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _render(make_url(server_url).set(database=name))
    finally:
        async with _connection(server_url) as connection:
            # FORCE ends connections a test's engine left open, so a leaky test cannot block cleanup.
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def _connection(url: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(libpq_dsn(url))
    try:
        yield connection
    finally:
        await connection.close()


def _canonical_scheme(url: str) -> str:
    # SQLAlchemy dropped the `postgres://` alias that Heroku-style URLs still use.
    return re.sub(r"^postgres(?=(\+[^:]*)?://)", "postgresql", url.strip())


def _render(url: URL) -> str:
    return url.render_as_string(hide_password=False)


def _has_server_tools(bin_dir: Path) -> bool:
    return (bin_dir / "initdb").is_file() and (bin_dir / "pg_ctl").is_file()


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and PostgreSQL refuses to run as root, but there is no "
            f"{UNPRIVILEGED_USER!r} user to run it as"
        ) from None


def _server_env() -> dict[str, str]:
    # Inherited PG* variables (PGDATA, PGPORT, PGHOST...) would point the tools at another cluster.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env["LC_ALL"] = "C"
    return env
