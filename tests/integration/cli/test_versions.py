"""`agentmesh versions` and `agentmesh move`: an agent's versions listed and a session moved to
one, through the gateway, as real processes."""

from __future__ import annotations

import json
from pathlib import Path

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient


async def test_versions_lists_newest_first_and_move_repins(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    env = {
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
    }
    seeded = await client.seed_agent(await client.login(), name="Versioned", mock_responses=["done"])
    session_id = (await client.stream_chat(seeded, "hello"))[0].event.session_id
    project = seeded.project_slug

    code, out = await cli("versions", project, "versioned", "-o", "json", config=tmp_path, env=env)
    assert code == 0, out
    assert [v["number"] for v in json.loads(out)] == [1]

    code, out = await cli("move", project, session_id, "latest", "-o", "json", config=tmp_path, env=env)
    assert code == 0, out
    assert [v["version"] for v in json.loads(out)] == [1]
    code, out = await cli("move", project, session_id, "7", config=tmp_path, env=env)
    assert code == 1 and "no version 7" in out, out
