"""Schemathesis against the gateway's own /openapi.json: generated valid and invalid requests for
every operation, signed in as a superuser (so every route is reachable), some aimed at resources
that exist, must never get a server error, and every answer must match the documented status
codes, content types and schemas. The generator runs in its own process (`fuzz.py`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api

pytest.importorskip("schemathesis", reason="schemathesis is a dev dependency")

ROOT = Path(__file__).resolve().parents[3]
# The fuzzing run is bounded by its own process timeout (300 s below); the suite's default hang
# guard (120 s) is shorter than that and cut it off on a busy machine as the API grew.
pytestmark = [pytest.mark.timeout(330), pytest.mark.long(82)]


async def test_the_openapi_schema_holds_under_generated_requests(
    mesh: Mesh, api: Api, once: None, tmp_path: Path
) -> None:
    admin = await api.admin()
    agent = await api.agent(admin, mock_responses=["fuzzed"])
    chat = await api.http.post(
        f"{agent.base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers=admin.headers,
    )
    agent_type = await api.agent_type()
    known = {
        "project_id": agent.project_id,
        "project_slug": agent.project_slug,
        "agent_id": agent.id,
        "agent_name": agent.name,
        "session_id": chat.headers["X-Session-Id"],
        "agent_type_id": agent_type["id"],
        "slug": agent_type["slug"],
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.integration.gateway.fuzz",
        mesh.gateway.http.url,
        admin.token,
        json.dumps(known),
        cwd=tmp_path,  # hypothesis and schemathesis keep caches in the working directory
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    report = json.loads(stdout.decode().strip().splitlines()[-1])
    assert report["operations"] >= 35
    assert report["failures"] == [], "\n\n".join(report["failures"])
    assert (await api.http.get("/healthz")).status_code == 200
