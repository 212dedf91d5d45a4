"""Helpers for CLI tests: a registry client that records its writes, the state of the registry as
plain data, ways to run typer commands from async tests and the CLI as a process, and a
pseudo-terminal to run it on as a user types into it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import struct
import sys
import termios
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import typer
from google.protobuf import json_format
from typer.testing import CliRunner, Result

from agentmesh.cli.client import Metadata
from agentmesh.registry.client import RegistryClient
from tests.e2e.harness import process_environment
from tests.polling import eventually

WRITES = (
    "create_agent_type",
    "update_agent_type",
    "delete_agent_type",
    "create_project",
    "update_project",
    "delete_project",
    "create_agent",
    "update_agent",
    "pause_agent",
    "resume_agent",
    "delete_agent",
    "create_mcp_server",
    "update_mcp_server",
    "delete_mcp_server",
)


class RecordingRegistry(RegistryClient):
    """A RegistryClient that records each write call: (method, update mask paths or None)."""

    def __init__(self, channel: Any) -> None:
        super().__init__(channel)
        self.writes: list[tuple[str, tuple[str, ...] | None]] = []

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name not in WRITES:
            return attribute

        async def recorded(*args: Any, **kwargs: Any) -> Any:
            paths = tuple(args[1]) if name.startswith("update_") else None
            self.writes.append((name, paths))
            return await attribute(*args, **kwargs)

        return recorded


async def snapshot(registry: RegistryClient, metadata: Metadata) -> dict[str, Any]:
    """Every agent type, project and agent the caller sees, as JSON-like dicts keyed by slug/name."""
    types = (await registry.list_agent_types(page_size=100, metadata=metadata)).agent_types
    projects = (await registry.list_projects(page_size=100, metadata=metadata)).projects
    state: dict[str, Any] = {
        "agent_types": {t.slug: json_format.MessageToDict(t) for t in types},
        "projects": {},
    }
    for project in projects:
        agents = (await registry.list_agents(project.id, page_size=100, metadata=metadata)).agents
        state["projects"][project.slug] = {
            **json_format.MessageToDict(project),
            "agents": {a.name: json_format.MessageToDict(a) for a in agents},
        }
    return state


async def invoke(
    app: typer.Typer,
    args: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
) -> Result:
    """Runs a command in a worker thread: commands call asyncio.run, and the test's event loop
    (where the mesh lives) must keep serving meanwhile."""
    runner = CliRunner()
    return await asyncio.to_thread(
        runner.invoke, app, list(args), env=env, input=input, catch_exceptions=False
    )


async def run_agentmesh(*args: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    """Runs `agentmesh ARGS` as its own process (as a user does), without a terminal on stdin;
    returns the exit code, stdout and stderr. `env` is added to this environment stripped of
    every AGENTMESH_ (and OTEL_) variable, so only what the test gives counts."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "agentmesh.cli.main", *args),
        env=process_environment({"COLUMNS": "200", **env}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def cli(*args: str, config: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`agentmesh ARGS` with its sign-in kept in `config` (see `agentmesh`): the exit code, and
    stdout and stderr as a user sees them, interleaved."""
    result = await _in_process(args, {"AGENTMESH_CONFIG_DIR": str(config), **(env or {})})
    return result.exit_code, result.output


async def agentmesh(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Runs `agentmesh ARGS` in this process, as its entry point does (a worker thread; the mesh
    keeps serving in this event loop meanwhile), in an environment of only what the test gives:
    the exit code, stdout and stderr. A process costs about a second of CPU each; what only a
    process shows (piped output, a terminal, import time) has tests of its own (`run_agentmesh`,
    `Terminal`, tests/unit/cli/test_lazy_imports.py)."""
    result = await _in_process(args, env)
    return result.exit_code, result.stdout, result.stderr


async def _in_process(args: Sequence[str], env: dict[str, str]) -> Result:
    from agentmesh.cli.main import app

    unset: dict[str, str | None] = {name: None for name in os.environ if name.startswith("AGENTMESH_")}
    return await invoke(app, args, env={**unset, "COLUMNS": "200", **env})


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
UP_ARROW = b"\x1b[A"
CTRL_D = b"\x04"


class Terminal:
    """A process on a pseudo-terminal: what it shows (escape codes removed) and a keyboard."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self._master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self._slave = slave
        self._args = args
        self._env = env
        self._shown = bytearray()
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMESH_")}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "agentmesh.cli.main", *self._args),
            env={**environment, "TERM": "xterm", "COLUMNS": "200", **self._env},
            stdin=self._slave,
            stdout=self._slave,
            stderr=self._slave,
            start_new_session=True,
        )
        os.close(self._slave)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 4096)
            except OSError:
                return
            if not chunk:
                return
            self._shown += chunk

    @property
    def text(self) -> str:
        return _ANSI.sub("", self._shown.decode(errors="replace"))

    def type(self, keys: bytes) -> None:
        os.write(self._master, keys)

    async def shows(self, what: str, *, times: int = 1) -> None:
        async def shown() -> bool:
            return self.text.count(what) >= times

        await eventually(shown, timeout=60, what=f"{what!r} shown {times}x; the terminal shows:\n{self.text}")

    async def exit_code(self) -> int:
        assert self.process is not None
        code = await asyncio.wait_for(self.process.wait(), timeout=60)
        # Everything it wrote is read before the terminal closes (reading ends at EIO).
        await asyncio.to_thread(self._reader.join, 30)
        os.close(self._master)
        return code
