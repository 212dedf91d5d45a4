"""`agentmesh limits`: a project's limits shown, set by a superuser, lowered by its owner and a
raise by the owner refused naming the limit. Each command runs as its own process."""

from __future__ import annotations

import uuid

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import agentmesh
from tests.mesh import MeshClient, bearer


async def test_a_superuser_sets_limits_and_the_owner_may_only_lower_them(
    mesh: Mesh, client: MeshClient
) -> None:
    email, password = f"owner-{uuid.uuid4().hex[:8]}@example.com", "owner-password-1"
    await client.registry.RegisterUser(reg.RegisterUserRequest(email=email, password=password))
    owner = await client.login(email, password)
    slug = f"limited-{uuid.uuid4().hex[:8]}"
    await client.registry.CreateProject(
        reg.CreateProjectRequest(project=resources_pb2.Project(name=slug, slug=slug)), metadata=bearer(owner)
    )
    as_root = {"AGENTMESH_TOKEN": await client.login(), "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}
    as_owner = {**as_root, "AGENTMESH_TOKEN": owner}

    code, out, err = await agentmesh("limits", slug, env=as_owner)
    assert (code, err) == (0, ""), err
    assert "  concurrent_runs: default\n" in out

    code, out, err = await agentmesh(
        "limits", slug, "concurrent_runs=4", "open_streams=0", "cost_per_day=2.50", env=as_root
    )
    assert (code, err) == (0, ""), err
    assert "  concurrent_runs: 4\n" in out and "  open_streams: unlimited\n" in out
    assert "  cost_per_day: $2.5\n" in out  # a budget in US dollars

    code, out, err = await agentmesh("limits", slug, "concurrent_runs=2", env=as_owner)
    assert (code, err) == (0, ""), err
    assert "  concurrent_runs: 2\n" in out and "  open_streams: unlimited\n" in out

    code, out, err = await agentmesh("limits", slug, "concurrent_runs=3", env=as_owner)
    assert code == 1
    assert "project.limits.concurrent_runs" in err

    code, out, err = await agentmesh("limits", slug, "tokens=3", env=as_owner)
    assert code == 1 and "NAME one of" in err
    assert "Traceback" not in err  # one clear line
