"""`agentmesh up`'s ports as a user meets them (the real command, as a process): the environment
sets them (flags win over it), and a port that is taken is one clear line naming the flag and the
variable to change — no traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli.support import run_agentmesh


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _one_clear_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("agentmesh up:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "excepthook" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("flag", "variable", "what"),
    [
        ("--http-port", "AGENTMESH_GATEWAY_HTTP_PORT", "HTTP"),
        ("--grpc-port", "AGENTMESH_GATEWAY_PORT", "gRPC"),
    ],
)
async def test_a_taken_port_is_one_line_naming_the_flag_and_the_variable(
    taken_port: int, tmp_path: Path, flag: str, variable: str, what: str
) -> None:
    other = "--grpc-port" if flag == "--http-port" else "--http-port"
    code, _, err = await run_agentmesh(
        "up", flag, str(taken_port), other, "0", "--data-dir", str(tmp_path), env={}
    )
    assert code == 1
    line = _one_clear_line(err)
    assert f"127.0.0.1:{taken_port} is already in use" in line
    assert flag in line and variable in line and what in line


async def test_the_environment_sets_the_port_when_no_flag_does(taken_port: int, tmp_path: Path) -> None:
    # Were the variable ignored, `up` would start on the default port instead of refusing this one.
    code, _, err = await run_agentmesh(
        "up",
        "--grpc-port",
        "0",
        "--data-dir",
        str(tmp_path),
        env={"AGENTMESH_GATEWAY_HTTP_PORT": str(taken_port)},
    )
    assert code == 1
    assert f"127.0.0.1:{taken_port} is already in use" in _one_clear_line(err)


async def test_a_flag_wins_over_the_environment(taken_port: int, tmp_path: Path) -> None:
    # The variable names the free port 0 ... and the flag the taken one: the flag is what counts.
    code, _, err = await run_agentmesh(
        "up",
        "--http-port",
        str(taken_port),
        "--grpc-port",
        "0",
        "--data-dir",
        str(tmp_path),
        env={"AGENTMESH_GATEWAY_HTTP_PORT": "0"},
    )
    assert code == 1
    assert f"127.0.0.1:{taken_port} is already in use" in _one_clear_line(err)
