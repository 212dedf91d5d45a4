"""`agentmesh fork`: a session forked at an event through the gateway, as a real process."""

from __future__ import annotations

import json
from pathlib import Path

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient


async def test_fork_prints_the_new_session_and_refuses_a_seq_past_the_end(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    env = {
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
    }
    seeded = await client.seed_agent(await client.login(), name="Forked", mock_responses=["done"])
    session_id = (await client.stream_chat(seeded, "hello"))[0].event.session_id
    project = seeded.project_slug

    code, out = await cli(
        "fork", project, session_id, "1", "--as", f"{session_id}-fork", "-o", "json", config=tmp_path, env=env
    )
    assert code == 0, out
    forked = json.loads(out)
    assert forked["id"] == f"{session_id}-fork"
    # int64 fields are strings in proto JSON.
    assert (forked["forked_from_session_id"], forked["forked_at_seq"]) == (session_id, "1")

    code, out = await cli("fork", project, session_id, "999", config=tmp_path, env=env)
    assert code == 1 and "beyond" in out, out
