"""Services as separate OS processes, for end-to-end tests.

`ServiceProcess` starts one command with a given environment, waits for the line that says it is
serving (failing with the process's output when it exits or times out first), exposes the
addresses it printed, and stops it with SIGTERM — SIGKILL only when it does not drain in time.
stdout and stderr go to files in a log directory, kept after the test for debugging::

    ports = free_loopback_ports(1)
    env = {"AGENTMESH_MEMORY_PORT": str(ports[0]), "AGENTMESH_DATABASE_URL": url}
    async with ServiceProcess.serve("memory", env=env, log_dir=tmp_path) as memory:
        channel = grpc.aio.insecure_channel(memory.grpc_address)
        ...
    assert memory.returncode == 0  # drained cleanly on SIGTERM

The ready lines are those `agentmesh serve` prints: "<name> serving gRPC on HOST:PORT", and for
the gateway also "<name> serving HTTP on URL".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from agentmesh.runtime.health import check_health

GRPC_READY = re.compile(r"^\S+ serving gRPC on (?P<grpc_address>\S+)\s*$", re.MULTILINE)
HTTP_READY = re.compile(r"^\S+ serving HTTP on (?P<http_url>\S+)\s*$", re.MULTILINE)
# What `agentmesh up` prints once the whole mesh serves.
UP_READY = re.compile(r"^agentmesh is up", re.MULTILINE)

# Variables of the test runner's own environment that a service must not inherit: they would
# configure it behind the test's back (a developer's shell may well export some).
PRIVATE_ENV_PREFIXES = ("AGENTMESH_", "OTEL_")

POLL_SECONDS = 0.05
OUTPUT_TAIL_LINES = 40


class ServiceProcessError(RuntimeError):
    """A service process did not become ready, or misbehaved while the test used it."""


def agentmesh_command(*args: str) -> list[str]:
    """`agentmesh ARGS` as this interpreter's installation runs it: the console script beside
    `sys.executable` (what a container's `agentmesh` is), else `python -m agentmesh.cli.main`."""
    script = Path(sys.executable).with_name("agentmesh")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), *args]
    return [sys.executable, "-m", "agentmesh.cli.main", *args]


def resolve_command(command: Sequence[str]) -> list[str]:
    """A container command made runnable here: a leading `agentmesh` becomes this venv's."""
    if not command:
        raise ValueError("empty command")
    if command[0] == "agentmesh":
        return agentmesh_command(*command[1:])
    return list(command)


def ready_patterns(service: str) -> tuple[re.Pattern[str], ...]:
    """What `agentmesh serve SERVICE` prints once it serves: the gateway also serves HTTP."""
    return (GRPC_READY, HTTP_READY) if service == "gateway" else (GRPC_READY,)


def process_environment(env: Mapping[str, str], *, inherit: bool = True) -> dict[str, str]:
    """The environment a service process gets: `env` over this process's own environment (less
    the AGENTMESH_* and OTEL_* variables), with unbuffered Python output."""
    base: dict[str, str] = {}
    if inherit:
        base = {key: value for key, value in os.environ.items() if not key.startswith(PRIVATE_ENV_PREFIXES)}
    return {**base, "PYTHONUNBUFFERED": "1", **{key: str(value) for key, value in env.items()}}


async def wait_until(
    condition: Callable[[], Awaitable[bool]],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
) -> None:
    """Polls `condition` until it holds; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g}s")
        await asyncio.sleep(interval)


class ServiceProcess:
    """One service running as a separate OS process, started and stopped by a test.

    Owns the process and its two log files (`<log_dir>/<name>.stdout.log`, `.stderr.log`); the
    files are appended to, so a process restarted with `start()` after `stop()` keeps its history.
    `started` lists every one started during the current test: a failing test's report ends with
    their last lines (tests/conftest.py).
    """

    started: ClassVar[list[ServiceProcess]] = []

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        log_dir: Path,
        cwd: Path | None = None,
        ready: Sequence[re.Pattern[str]] = (GRPC_READY,),
        inherit_env: bool = True,
    ) -> None:
        self.name = name
        self.command = resolve_command(command)
        self.env = process_environment(env, inherit=inherit_env)
        self.log_dir = log_dir
        self.cwd = cwd or log_dir
        self.ready = tuple(ready)
        self.stdout_path = log_dir / f"{name}.stdout.log"
        self.stderr_path = log_dir / f"{name}.stderr.log"
        self.ready_fields: dict[str, str] = {}
        self._process: asyncio.subprocess.Process | None = None
        self._stdout_offset = 0

    @classmethod
    def serve(
        cls,
        service: str,
        *,
        env: Mapping[str, str],
        log_dir: Path,
        name: str | None = None,
        cwd: Path | None = None,
        inherit_env: bool = True,
    ) -> ServiceProcess:
        """`python -m agentmesh.cli.main serve SERVICE`, ready when it prints its address(es)."""
        return cls(
            name or service,
            [sys.executable, "-m", "agentmesh.cli.main", "serve", service],
            env=env,
            log_dir=log_dir,
            cwd=cwd,
            ready=ready_patterns(service),
            inherit_env=inherit_env,
        )

    # -- state ------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    @property
    def returncode(self) -> int | None:
        """The exit code once it exited (negative: killed by that signal), else None."""
        return self._process.returncode if self._process else None

    @property
    def grpc_address(self) -> str:
        """host:port the service printed in its "serving gRPC on" line."""
        return self._ready_field("grpc_address")

    @property
    def http_url(self) -> str:
        """URL the service printed in its "serving HTTP on" line (the gateway)."""
        return self._ready_field("http_url")

    def _ready_field(self, field: str) -> str:
        try:
            return self.ready_fields[field]
        except KeyError:
            raise ServiceProcessError(
                f"{self.name} has not reported its {field} (started and ready?)"
            ) from None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self, *, timeout: float = 90.0) -> Self:
        """Starts the process and waits until it printed every ready line."""
        if self.running:
            raise ServiceProcessError(f"{self.name} is already running (pid {self.pid})")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        if self not in ServiceProcess.started:
            ServiceProcess.started.append(self)
        self.ready_fields = {}
        with self.stdout_path.open("ab") as stdout, self.stderr_path.open("ab") as stderr:
            for stream in (stdout, stderr):
                stream.write(f"--- {self.name}: {shlex.join(self.command)}\n".encode())
                stream.flush()
            self._stdout_offset = stdout.tell()
            # A session of its own: a Ctrl-C at the terminal reaches the test runner, which then
            # stops its services in order, rather than every process at once.
            self._process = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        try:
            for pattern in self.ready:
                match = await self.wait_for_output(pattern, timeout=timeout)
                self.ready_fields.update(match.groupdict())
        except BaseException:
            await self.kill()
            raise
        return self

    async def wait_for_output(
        self, pattern: re.Pattern[str] | str, *, timeout: float = 90.0
    ) -> re.Match[str]:
        """The first match of `pattern` in what the process printed on stdout since it started."""
        if isinstance(pattern, str):
            pattern = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            match = pattern.search(self._stdout_since_start())
            if match:
                return match
            if not self.running:
                # Its last words may have landed after the read above.
                match = pattern.search(self._stdout_since_start())
                if match:
                    return match
                raise ServiceProcessError(
                    self.describe(f"exited with code {self.returncode} before printing {pattern.pattern!r}")
                )
            if time.monotonic() > deadline:
                raise ServiceProcessError(
                    self.describe(f"did not print {pattern.pattern!r} within {timeout:g}s")
                )
            await asyncio.sleep(POLL_SECONDS)

    async def wait_serving(self, *, timeout: float = 30.0, address: str | None = None) -> None:
        """Waits until the gRPC health service at `address` (default: the printed one) reports
        SERVING for the whole server."""

        async def serving() -> bool:
            if not self.running:
                raise ServiceProcessError(self.describe(f"exited with code {self.returncode}"))
            return await check_health(address or self.grpc_address, timeout=1.0) == "SERVING"

        try:
            await wait_until(serving, timeout=timeout, what=f"{self.name} reporting SERVING")
        except TimeoutError as error:
            raise ServiceProcessError(self.describe(str(error))) from None

    async def stop(self, *, timeout: float = 15.0) -> int | None:
        """SIGTERM, then waits for the drain; SIGKILL after `timeout` seconds. The exit code."""
        if self._process is None:
            return None
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self._process.wait(), timeout)
            except TimeoutError:
                await self.kill()
        return self._process.returncode

    async def kill(self) -> int | None:
        """SIGKILL at once (a crash, for failover tests) and reaps the process. The exit code."""
        if self._process is None:
            return None
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        return await self._process.wait()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- output -----------------------------------------------------------------------------------

    def output(self, *, tail_lines: int = OUTPUT_TAIL_LINES) -> str:
        """The last lines of stdout and stderr, for error messages."""
        return "\n".join(
            f"--- {path.name} (last {tail_lines} lines):\n{_tail(path, tail_lines)}"
            for path in (self.stdout_path, self.stderr_path)
        )

    def describe(self, problem: str) -> str:
        return f"{self.name} (pid {self.pid}) {problem}\ncommand: {shlex.join(self.command)}\n{self.output()}"

    def _stdout_since_start(self) -> str:
        try:
            with self.stdout_path.open("rb") as stdout:
                stdout.seek(self._stdout_offset)
                return stdout.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}" if self._process else "not started"
        return f"<ServiceProcess {self.name} pid={self.pid} {state}>"


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no output)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def agentmesh_up(
    tmp_path: Path, *, http_port: int, grpc_port: int, superuser: tuple[str, str], env: Mapping[str, str] = {}
) -> ServiceProcess:
    """`agentmesh up` on these ports, its data and logs in `tmp_path`, with this superuser (email,
    password) and `env` over a clean environment; start it with `async with`."""
    return ServiceProcess(
        "up",
        [
            *(sys.executable, "-m", "agentmesh.cli.main", "up"),
            *("--http-port", str(http_port), "--grpc-port", str(grpc_port)),
            *("--data-dir", str(tmp_path / "data")),
        ],
        env={
            "AGENTMESH_SUPERUSER_EMAIL": superuser[0],
            "AGENTMESH_SUPERUSER_PASSWORD": superuser[1],
            **env,
        },
        log_dir=tmp_path,
        ready=(UP_READY,),
        inherit_env=False,
    )
