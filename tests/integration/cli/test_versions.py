"""`agentmesh versions` and `agentmesh move`: an agent's versions listed, compared and rolled back
to, and a session (or every session of the agent) moved to one, through the gateway, as real
processes."""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import field_mask_pb2, struct_pb2

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, bearer


async def test_versions_lists_newest_first_and_move_repins(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    env = {
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
    }
    token = await client.login()
    seeded = await client.seed_agent(token, name="Versioned", mock_responses=["done"])
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

    # A change makes version 2: what changed, every session moved to it, and a rollback.
    config = resources_pb2.AgentConfig(
        mock_responses=struct_pb2.ListValue(values=[struct_pb2.Value(string_value="again")])
    )
    await client.registry.UpdateAgent(
        reg.UpdateAgentRequest(
            agent=resources_pb2.Agent(project_id=seeded.project_id, id=seeded.agent_id, config=config),
            update_mask=field_mask_pb2.FieldMask(paths=["config.mock_responses"]),
        ),
        metadata=bearer(token),
    )
    code, out = await cli(
        "versions", project, "versioned", "--diff", "2", "-o", "json", config=tmp_path, env=env
    )
    assert code == 0, out
    assert json.loads(out) == [{"field": "config.mock_responses", "before": ["done"], "after": ["again"]}]
    code, out = await cli(
        "versions", project, "versioned", "--diff", "2", "--against", "1", config=tmp_path, env=env
    )
    assert code == 0 and "config.mock_responses" in out and '["again"]' in out, out

    code, out = await cli(
        "move", project, "versioned", "latest", "--all-sessions", "-o", "json", config=tmp_path, env=env
    )
    assert code == 0, out
    assert json.loads(out) == {"agent_id": seeded.agent_id, "version": 2, "moved_sessions": 1, "sessions": 1}

    code, out = await cli(
        "versions", project, "versioned", "--restore", "1", "-o", "json", config=tmp_path, env=env
    )
    assert code == 0, out
    restored = json.loads(out)
    assert restored["number"] == 3 and restored["config"]["mock_responses"] == ["done"]
