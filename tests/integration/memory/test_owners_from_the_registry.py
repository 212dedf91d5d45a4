"""Memory learns a project's owner from the registry, never from its first caller: in a whole mesh
(memory given the registry's address), a service acting for user B in user A's new project —
before A ever called — is refused (NOT_FOUND, as for a project that does not exist), and so is any
user in a project the registry does not know; A is served."""

from __future__ import annotations

import grpc
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.memory.v1 import memory_service_pb2 as memory_pb
from agentmesh.memory.v1 import memory_service_pb2_grpc as memory_grpc
from agentmesh.registry.v1 import registry_service_pb2 as registry_pb
from agentmesh.registry.v1 import resources_pb2
from tests.bearer import service_channel
from tests.mesh import MeshClient, bearer


async def _user(client: MeshClient, name: str) -> str:
    email, password = f"{name}@example.com", f"{name}-password-1"
    await client.registry.RegisterUser(registry_pb.RegisterUserRequest(email=email, password=password))
    return await client.login(email, password)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_projects_owner_comes_from_the_registry(mesh: Mesh, client: MeshClient) -> None:
    ada, bob = await _user(client, "ada"), await _user(client, "bob")
    created = await client.registry.CreateProject(
        registry_pb.CreateProjectRequest(project=resources_pb2.Project(name="Ada's", slug="adas")),
        metadata=bearer(ada),
    )
    async with service_channel(mesh.services["memory"].address) as channel:
        memory = memory_grpc.MemoryServiceStub(channel)

        async def sessions(project_id: str, token: str) -> grpc.StatusCode:
            try:
                await memory.ListSessions(
                    memory_pb.ListSessionsRequest(project_id=project_id), metadata=bearer(token)
                )
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

        # Bob first: under trust on first use he would have become the owner.
        assert await sessions(created.project.id, bob) == grpc.StatusCode.NOT_FOUND
        assert await sessions(created.project.id, ada) == grpc.StatusCode.OK
        assert await sessions(created.project.id, bob) == grpc.StatusCode.NOT_FOUND
        assert await sessions("no-such-project", ada) == grpc.StatusCode.NOT_FOUND
