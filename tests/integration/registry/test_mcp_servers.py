"""Registered MCP servers over gRPC: superuser-managed, global or a project's,
their env and header values written but never read back — except by ResolveMcpServers, for the
system principal (executors) alone."""

from __future__ import annotations

import grpc
from google.protobuf import field_mask_pb2

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, bearer, rpc_error, violation_fields

GRPC = grpc.StatusCode
TOKEN = "ghp_registry-secret-0123456789"
MASK = "********"


def knowledge_base(**fields: object) -> res.McpServer:
    values: dict[str, object] = {
        "name": "knowledge-base",
        "transport": "streamable_http",
        "url": "https://kb.example.com/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "env": {"KB_TOKEN": TOKEN, "FROM_ENV": "${env:KB_TOKEN}"},
    }
    values.update(fields)
    return res.McpServer(**values)  # type: ignore[arg-type]


async def create(stub: pb_grpc.RegistryServiceStub, api: Api, server: res.McpServer) -> res.McpServer:
    root = await api.root()
    request = pb.CreateMcpServerRequest(mcp_server=server)
    return (await stub.CreateMcpServer(request, metadata=root.metadata)).mcp_server


async def test_crud_with_masked_secrets(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    created = await create(stub, api, knowledge_base())
    assert created.id and created.project_id == "" and created.created_at.seconds > 0
    assert dict(created.headers) == {"Authorization": MASK}
    assert dict(created.env) == {"KB_TOKEN": MASK, "FROM_ENV": MASK}

    by_id = (
        await stub.GetMcpServer(pb.GetMcpServerRequest(id=created.id), metadata=root.metadata)
    ).mcp_server
    by_name = await stub.GetMcpServer(pb.GetMcpServerRequest(name="knowledge-base"), metadata=root.metadata)
    assert by_id == created == by_name.mcp_server
    listed = await stub.ListMcpServers(pb.ListMcpServersRequest(), metadata=root.metadata)
    assert list(listed.mcp_servers) == [created] and listed.total_size == 1
    assert TOKEN not in str(listed) + str(by_id)

    # Sending the mask back keeps a value; a new key or value is written.
    change = res.McpServer(
        id=created.id, url="https://kb2.example.com/mcp", env={"KB_TOKEN": MASK, "NEW": "x"}
    )
    updated = (
        await stub.UpdateMcpServer(
            pb.UpdateMcpServerRequest(
                mcp_server=change, update_mask=field_mask_pb2.FieldMask(paths=["url", "env"])
            ),
            metadata=root.metadata,
        )
    ).mcp_server
    assert updated.url == "https://kb2.example.com/mcp" and dict(updated.env) == {
        "KB_TOKEN": MASK,
        "NEW": MASK,
    }
    assert updated.updated_at.ToDatetime() >= created.updated_at.ToDatetime()

    await stub.DeleteMcpServer(pb.DeleteMcpServerRequest(id=created.id), metadata=root.metadata)
    error = await rpc_error(stub.GetMcpServer(pb.GetMcpServerRequest(id=created.id), metadata=root.metadata))
    assert (error.code, error.reason) == (GRPC.NOT_FOUND, "MCP_SERVER_NOT_FOUND")
    error = await rpc_error(
        stub.DeleteMcpServer(pb.DeleteMcpServerRequest(id=created.id), metadata=root.metadata)
    )
    assert error.code == GRPC.NOT_FOUND


async def test_names_are_unique_per_scope_and_a_project_takes_its_servers_along(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    project = await api.project(root)
    await create(stub, api, knowledge_base())
    mine = await create(stub, api, knowledge_base(project_id=project.id, url="https://mine.example.com/mcp"))
    assert mine.project_id == project.id  # the same name in another scope is fine
    error = await rpc_error(create(stub, api, knowledge_base()))
    assert (error.code, error.reason) == (GRPC.ALREADY_EXISTS, "MCP_SERVER_NAME_TAKEN")
    only_mine = await stub.ListMcpServers(
        pb.ListMcpServersRequest(project_id=project.id), metadata=root.metadata
    )
    assert [s.id for s in only_mine.mcp_servers] == [mine.id]
    error = await rpc_error(create(stub, api, knowledge_base(project_id="no-such-project")))
    assert (error.code, error.reason) == (GRPC.NOT_FOUND, "PROJECT_NOT_FOUND")

    await stub.DeleteProject(pb.DeleteProjectRequest(id=project.id), metadata=root.metadata)
    error = await rpc_error(stub.GetMcpServer(pb.GetMcpServerRequest(id=mine.id), metadata=root.metadata))
    assert error.code == GRPC.NOT_FOUND


async def test_paging_by_token_and_page(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    made = [(await create(stub, api, knowledge_base(name=f"server-{i}"))).id for i in range(3)]
    first = await stub.ListMcpServers(pb.ListMcpServersRequest(page_size=2), metadata=root.metadata)
    second = await stub.ListMcpServers(
        pb.ListMcpServersRequest(page_size=2, page_token=first.next_page_token), metadata=root.metadata
    )
    assert [s.id for s in (*first.mcp_servers, *second.mcp_servers)] == made and not second.next_page_token
    page_two = await stub.ListMcpServers(
        pb.ListMcpServersRequest(page_size=2, page=2), metadata=root.metadata
    )
    assert [s.id for s in page_two.mcp_servers] == made[2:]


async def test_bad_input_names_the_field(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    for server, field in (
        (res.McpServer(name="Not A Label", transport="stdio", command="x"), "mcp_server.name"),
        (res.McpServer(name="x", transport="carrier-pigeon"), "mcp_server.transport"),
        (res.McpServer(name="x", transport="stdio"), "mcp_server.command"),
        (res.McpServer(name="x", transport="streamable_http", url="ftp://x"), "mcp_server.url"),
        (res.McpServer(name="x", transport="stdio", command="x", env={"": "v"}), "mcp_server.env"),
    ):
        error = await rpc_error(create(stub, api, server))
        assert error.code == GRPC.INVALID_ARGUMENT and field in violation_fields(error), (server, error)
    created = await create(stub, api, knowledge_base())
    for paths in ([], ["id"], ["project_id"]):
        error = await rpc_error(
            stub.UpdateMcpServer(
                pb.UpdateMcpServerRequest(
                    mcp_server=res.McpServer(id=created.id), update_mask=field_mask_pb2.FieldMask(paths=paths)
                ),
                metadata=root.metadata,
            )
        )
        assert error.code == GRPC.INVALID_ARGUMENT and violation_fields(error) == {"update_mask"}
    error = await rpc_error(stub.GetMcpServer(pb.GetMcpServerRequest(), metadata=root.metadata))
    assert error.code == GRPC.INVALID_ARGUMENT
    listed = await stub.ListMcpServers(pb.ListMcpServersRequest(), metadata=root.metadata)
    assert listed.total_size == 1  # nothing stored half-way


async def test_only_superusers_manage_them_and_only_the_system_reads_secrets(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, codec: TokenCodec, internal_stub
) -> None:
    user = await api.sign_up()
    created = await create(stub, api, knowledge_base())
    for call in (
        stub.CreateMcpServer(
            pb.CreateMcpServerRequest(mcp_server=knowledge_base(name="y")), metadata=user.metadata
        ),
        stub.GetMcpServer(pb.GetMcpServerRequest(id=created.id), metadata=user.metadata),
        stub.ListMcpServers(pb.ListMcpServersRequest(), metadata=user.metadata),
        stub.DeleteMcpServer(pb.DeleteMcpServerRequest(id=created.id), metadata=user.metadata),
    ):
        assert (await rpc_error(call)).code == GRPC.PERMISSION_DENIED

    # An agent of the user's naming the server, and one that does not exist (yet).
    project = await api.project(user)
    agent_type = await api.agent_type(
        mcp_servers=[
            res.McpServer(name="knowledge-base"),
            res.McpServer(name="not-yet"),
            res.McpServer(name="inline", transport="stdio", command="srv", env={"SECRET": TOKEN}),
        ]
    )
    assert [dict(s.env) for s in agent_type.mcp_servers] == [{}, {}, {"SECRET": MASK}]
    agent = await api.agent(user, project, "helper", agent_type=agent_type)
    spec = await client.resolve_agent(project.slug, "helper", metadata=user.metadata)
    assert TOKEN not in str(spec) and [s.name for s in spec.mcp_servers] == [
        "knowledge-base",
        "not-yet",
        "inline",
    ]

    request = ipb.ResolveMcpServersRequest(agent_id=agent.id)
    error = await rpc_error(internal_stub.ResolveMcpServers(request, metadata=user.metadata))
    assert error.code == GRPC.PERMISSION_DENIED
    root = await api.root()
    assert (
        await rpc_error(internal_stub.ResolveMcpServers(request, metadata=root.metadata))
    ).code == GRPC.PERMISSION_DENIED
    resolved = await internal_stub.ResolveMcpServers(request, metadata=bearer(codec.system_token()))
    assert [s.name for s in resolved.servers] == ["knowledge-base", "inline"]
    assert list(resolved.missing) == ["not-yet"]
    assert resolved.servers[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert resolved.servers[1].env["SECRET"] == TOKEN

    # The project's own server of a name hides the global one.
    await create(stub, api, knowledge_base(project_id=project.id, url="https://own.example.com/mcp"))
    resolved = await internal_stub.ResolveMcpServers(request, metadata=bearer(codec.system_token()))
    assert resolved.servers[0].url == "https://own.example.com/mcp"


async def test_an_agent_type_keeps_inline_secrets_sent_back_masked(
    stub: pb_grpc.RegistryServiceStub, api: Api, codec: TokenCodec, internal_stub
) -> None:
    root = await api.root()
    inline = res.McpServer(name="inline", transport="stdio", command="srv", env={"SECRET": TOKEN})
    agent_type = await api.agent_type(mcp_servers=[inline])
    read = (
        await stub.GetAgentType(pb.GetAgentTypeRequest(id=agent_type.id), metadata=root.metadata)
    ).agent_type
    assert dict(read.mcp_servers[0].env) == {"SECRET": MASK}
    # A read-modify-write of the whole list (as a client that only changes the command does).
    read.mcp_servers[0].command = "srv2"
    await stub.UpdateAgentType(
        pb.UpdateAgentTypeRequest(
            agent_type=read, update_mask=field_mask_pb2.FieldMask(paths=["mcp_servers"])
        ),
        metadata=root.metadata,
    )
    project = await api.project(root)
    agent = await api.agent(root, project, "keeper", agent_type=agent_type)
    resolved = await internal_stub.ResolveMcpServers(
        ipb.ResolveMcpServersRequest(agent_id=agent.id), metadata=bearer(codec.system_token())
    )
    assert (resolved.servers[0].command, resolved.servers[0].env["SECRET"]) == ("srv2", TOKEN)
    error = await rpc_error(
        internal_stub.ResolveMcpServers(
            ipb.ResolveMcpServersRequest(agent_id="nope"), metadata=bearer(codec.system_token())
        )
    )
    assert (error.code, error.reason) == (GRPC.NOT_FOUND, "AGENT_NOT_FOUND")


async def test_a_reference_must_be_a_name_a_server_could_have(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    bad = res.AgentType(name="x", primary_model="mock", mcp_servers=[res.McpServer(name="Knowledge Base")])
    error = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=bad), metadata=root.metadata)
    )
    assert violation_fields(error) == {"agent_type.mcp_servers[0].name"}
