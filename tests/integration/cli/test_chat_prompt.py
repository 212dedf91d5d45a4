"""`agentmesh chat PROJECT/AGENT` on a terminal: a prompt in one session, with a history kept
across runs. The command runs as its own process on a pseudo-terminal, as a user
types into it."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import stat
import struct
import sys
import termios
import threading
from pathlib import Path

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import run_agentmesh
from tests.mesh import MeshClient
from tests.polling import eventually

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


async def test_the_prompt_chats_in_one_session_and_keeps_a_history(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token)  # the echo model: the answer is the message
    env = {"AGENTMESH_CONFIG_DIR": str(tmp_path / "config"), "AGENTMESH_TOKEN": token}
    args = ("chat", seeded.ref, "--gateway", mesh.gateway.address)

    first = Terminal(*args, env=env)
    await first.start()
    await first.shows("you> ")
    first.type(b"hello there\n")
    await first.shows(f"{seeded.ref}: hello there")
    await first.shows("you> ", times=2)
    first.type(b"second message\n")
    await first.shows(f"{seeded.ref}: second message")
    await first.shows("you> ", times=3)
    first.type(CTRL_D)
    assert await first.exit_code() == 0, first.text
    assert first.text.count("agentmesh trace ") == 1, "both messages went to one session"

    history = tmp_path / "config" / "chat_history"
    assert "hello there" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600

    # A new run recalls the last message with the up arrow, and leaves on /exit.
    second = Terminal(*args, env=env)
    await second.start()
    await second.shows("you> ")
    second.type(UP_ARROW + b"\n")
    await second.shows(f"{seeded.ref}: second message")
    await second.shows("you> ", times=2)
    second.type(b"/exit\n")
    assert await second.exit_code() == 0, second.text


async def test_a_spinner_shows_on_a_terminal_only(mesh: Mesh, client: MeshClient, tmp_path: Path) -> None:
    token = await client.login()
    env = {"AGENTMESH_CONFIG_DIR": str(tmp_path / "config"), "AGENTMESH_TOKEN": token}
    args = ("get", "projects", "--gateway", mesh.gateway.address)

    terminal = Terminal(*args, env=env)
    await terminal.start()
    assert await terminal.exit_code() == 0, terminal.text
    assert "asking the mesh…" in terminal.text

    code, out, err = await run_agentmesh(*args, env=env)
    assert code == 0, err
    assert "asking the mesh" not in out + err
