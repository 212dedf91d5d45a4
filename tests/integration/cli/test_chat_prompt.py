"""`agentmesh chat PROJECT/AGENT` on a terminal: a prompt in one session, with a history kept
across runs. The command runs as its own process on a pseudo-terminal, as a user
types into it."""

from __future__ import annotations

import stat
from pathlib import Path

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import CTRL_D, UP_ARROW, Terminal, run_agentmesh
from tests.mesh import MeshClient


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
