"""`agentmesh --help`, `--version` and `healthcheck` answer without importing the services, the
database stack or the tracing stack: containers run `healthcheck` every few seconds, and those
imports take seconds on a busy machine. Each case runs the real command in a fresh interpreter
and reads what it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from agentmesh.cli.main import COMMANDS

HEAVY = (
    "agentmesh.registry",
    "agentmesh.memory",
    "agentmesh.executor",
    "agentmesh.gateway",
    "sqlalchemy",
    "opentelemetry",
)

PROBE = """\
import json, sys
from agentmesh.cli.main import app
try:
    app(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = sorted({{m.split(".")[0] if not m.startswith("agentmesh.") else ".".join(m.split(".")[:2])
               for m in sys.modules if m.startswith({heavy!r})}})
print(json.dumps({{"code": code, "heavy": heavy, "grpc": "grpc" in sys.modules}}))
"""


def run_cli(*args: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("up", "--help"),
        ("serve", "--help"),
        ("users", "create", "--help"),
        ("api-keys", "create", "--help"),
        *((name, "--help") for name in COMMANDS),
    ],
)
def test_help_and_version_import_neither_services_nor_grpc(args: tuple[str, ...]) -> None:
    found, _ = run_cli(*args)
    assert found == {"code": 0, "heavy": [], "grpc": False}


def test_version_comes_from_the_distribution() -> None:
    _, out = run_cli("--version")
    assert out == f"agentmesh {version('agentmesh')}"


def test_help_lists_every_command() -> None:
    _, out = run_cli("--help")
    for name in ("up", "serve", "healthcheck", *COMMANDS):
        assert name in out


def test_healthcheck_imports_grpc_only() -> None:
    # Port 1 on loopback: nothing listens, so the answer is UNAVAILABLE at once.
    found, out = run_cli("healthcheck", "127.0.0.1:1", "--timeout", "5")
    assert out == "UNAVAILABLE"
    assert found == {"code": 1, "heavy": [], "grpc": True}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_help_summary_of_a_lazy_command_is_its_own(name: str) -> None:
    """The group's help lists lazy commands from summaries kept in main.py; they must say what
    the commands themselves say."""
    assert COMMANDS[name].summary == COMMANDS[name].load(name).get_short_help_str(limit=1000)
