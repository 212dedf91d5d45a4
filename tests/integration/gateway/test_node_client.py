"""The public gRPC contract across languages: a Node.js client (`@grpc/grpc-js` with
`@grpc/proto-loader`, loading protos/ as they are) streams a chat through the gateway.

The client lives in tests/node/ with its pinned dependencies and lockfile; the test installs them
with `npm ci` into tests/node/node_modules (git-ignored) when they are missing or stale. Without
node and npm the test skips — except under CI=true, where it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api

NODE_DIR = Path(__file__).resolve().parents[2] / "node"
INSTALLED_LOCK = NODE_DIR / "node_modules" / ".package-lock.json"


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (required under CI=true)")
    pytest.skip(reason)


async def _run(*command: str, timeout: float) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=NODE_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=timeout)
    except TimeoutError:
        process.kill()
        raise
    return process.returncode or 0, stdout.decode(), stderr.decode()


async def _install() -> None:
    """`npm ci` unless node_modules already holds exactly what the lockfile pins."""
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())["packages"]
    if INSTALLED_LOCK.exists():
        installed = json.loads(INSTALLED_LOCK.read_text())["packages"]
        if all(
            installed.get(name, {}).get("version") == entry.get("version")
            for name, entry in lock.items()
            if name
        ):
            return
    code, _, stderr = await _run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", timeout=240)
    if code != 0:
        _skip_or_fail(f"npm ci failed in {NODE_DIR}: {stderr[-2000:]}")


async def test_a_node_grpc_client_streams_a_chat(mesh: Mesh, api: Api, once: None) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        _skip_or_fail("node and npm are needed for the Node.js client test")
    await _install()
    agent = await api.agent(
        mock_responses=["Hello from agentmesh, streamed to Node.js in several chunks " * 3]
    )

    code, stdout, stderr = await _run(
        "node",
        "stream_chat.js",
        mesh.gateway.address,
        agent.owner.token,
        agent.model,
        "hi from node",
        timeout=60,
    )
    assert code == 0, stderr
    header, *events = [json.loads(line) for line in stdout.splitlines()]
    assert header["session_id"]
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    # At least one delta; how many is not the contract (deltas that queue up merge).
    assert "text_delta" in kinds
    text = "".join(event["text_delta"]["text"] for event in events if event["kind"] == "text_delta")
    assert text == events[-1]["run_completed"]["content"]
    assert {event["session_id"] for event in events} == {header["session_id"]}

    # Errors arrive as gRPC statuses there too.
    code, _, stderr = await _run(
        "node", "stream_chat.js", mesh.gateway.address, "forged", agent.model, "hi", timeout=60
    )
    assert code == 2
    assert json.loads(stderr.splitlines()[-1])["code"] == "UNAUTHENTICATED"
