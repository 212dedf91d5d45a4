"""A project's spending as a person reads it: `agentmesh usage` (as its own process) and the REST
route `GET /api/v1/projects/{id}/usage` group the cost ledger per model and agent; with no price
set for the model, the cost is said to be unknown — null over REST, "unknown" at the CLI."""

from __future__ import annotations

import json

import httpx

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import agentmesh
from tests.mesh import MeshClient, bearer
from tests.polling import eventually

USAGE = {"input_tokens": 120, "output_tokens": 8, "cached_input_tokens": 20}


async def test_usage_is_read_per_model_over_rest_and_at_the_cli(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=[{"content": "Hello.", "usage": USAGE}])
    await client.stream_chat(seeded, "Hi")
    await client.stream_chat(seeded, "Hi again")
    path = f"/api/v1/projects/{seeded.project_id}/usage"

    async with httpx.AsyncClient(
        base_url=mesh.gateway.http.url, headers=dict(bearer(seeded.token)), timeout=30
    ) as http:

        async def both_counted() -> bool:
            answer = await http.get(path)
            return answer.status_code == 200 and answer.json()["total"]["calls"] == 2

        await eventually(both_counted, what="both chats' calls in the ledger")
        by_model = (await http.get(path, params={"group_by": ["model", "agent"]})).json()
        refused = await http.get(path, params={"group_by": "colour"})
        malformed = await http.get(path, params={"start_day": "yesterday"})

    [group] = by_model["groups"]
    assert (group["model"], group["agent"], group["runs"], group["calls"]) == (
        "mock",
        seeded.agent_name,
        2,
        2,
    )
    assert (group["input_tokens"], group["output_tokens"], group["cached_input_tokens"]) == (240, 16, 40)
    assert group["cost"] is None and group["unpriced_models"] == ["mock"]  # no price set: unknown
    assert by_model["total"]["calls"] == 2 and not by_model["truncated"]
    assert refused.status_code == malformed.status_code == 422  # as every query the API refuses

    env = {"AGENTMESH_TOKEN": seeded.token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}
    code, out, err = await agentmesh("usage", seeded.project_slug, "--by", "model", env=env)
    assert (code, err) == (0, ""), err
    [row] = [line for line in out.splitlines() if "mock" in line]
    assert "unknown" in row and "240" in row, out

    code, out, err = await agentmesh("usage", seeded.project_slug, "-o", "json", env=env)
    assert (code, err) == (0, ""), err
    assert int(json.loads(out)["total"]["calls"]) == 2  # int64 as proto3 JSON writes it
