"""Every way a service process starts turns gRPC's fork handlers off before grpc is imported:
the executor starts stdio MCP servers with fork() (uvloop), and with the handlers on, children
forked while other threads were inside gRPC died before they could exec
(docs/decisions/0020-grpc-fork-handlers-off.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Imports the entry module without running it, and prints what the setting was at the moment
# something first imported grpc.
_PROBE = """
import importlib.abc, os, runpy, sys

seen = []

class FirstGrpcImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "grpc" and not seen:
            seen.append(os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "(unset)"))
        return None

sys.meta_path.insert(0, FirstGrpcImport())
runpy.run_module(sys.argv[1], run_name="probed")
import grpc
print(seen[0])
"""


@pytest.mark.parametrize(
    "entry",
    [
        "agentmesh.cli.main",
        "agentmesh.registry.__main__",
        "agentmesh.memory.__main__",
        "agentmesh.executor.__main__",
        "agentmesh.gateway.__main__",
    ],
)
def test_grpc_is_imported_with_its_fork_handlers_off(entry: str) -> None:
    env = {name: value for name, value in os.environ.items() if name != "GRPC_ENABLE_FORK_SUPPORT"}
    assert _setting_when_grpc_is_imported(entry, env) == "false"


def test_an_operator_may_still_turn_them_on() -> None:
    env = {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "true"}
    assert _setting_when_grpc_is_imported("agentmesh.executor.__main__", env) == "true"


def _setting_when_grpc_is_imported(entry: str, env: dict[str, str]) -> str:
    probe = [sys.executable, "-c", _PROBE, entry]
    result = subprocess.run(probe, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()
