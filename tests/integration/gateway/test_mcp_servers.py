"""`/api/v1/mcp-servers` and agent types naming MCP servers, through the gateway's REST API and its
public gRPC: superusers only, 4xx naming the field for bad input, and env and
header values never in an answer — the agent-platform suite's `"mcp_servers": ["knowledge-base"]`."""

from __future__ import annotations

import grpc
import httpx

from agentmesh.cli.mesh import Mesh
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ireg
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as ireg_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from agentmesh.registry.v1.registry_service_pb2_grpc import RegistryServiceStub
from tests.integration.gateway.support import Api, User, suffix
from tests.mesh import bearer

SECRET = "ghp_gateway-secret-9876543210"
MASK = "********"


def server_body(**fields: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": f"kb-{suffix()}",
        "transport": "streamable_http",
        "url": "https://kb.example.com/mcp",
        "headers": {"Authorization": f"Bearer {SECRET}"},
    }
    body.update(fields)
    return body


async def test_crud_is_for_superusers_and_never_shows_a_secret(http: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    created = await http.post(
        "/api/v1/mcp-servers", json=server_body(env={"T": SECRET}), headers=admin.headers
    )
    assert created.status_code == 201, created.text
    server = created.json()
    assert set(server) == {
        "id", "name", "project_id", "transport", "command", "args", "url", "env", "headers", "created_at",
        "updated_at",
    }  # fmt: skip
    assert (server["project_id"], server["headers"], server["env"]) == (
        None,
        {"Authorization": MASK},
        {"T": MASK},
    )
    path = f"/api/v1/mcp-servers/{server['id']}"

    got = await http.get(path, headers=admin.headers)
    listed = await http.get("/api/v1/mcp-servers", params={"page_size": 1000}, headers=admin.headers)
    assert got.json() == server and server in listed.json()["data"]
    patched = await http.patch(
        path, json={"url": "https://kb2.example.com/mcp", "env": {"T": MASK}}, headers=admin.headers
    )
    assert patched.status_code == 200 and patched.json()["url"] == "https://kb2.example.com/mcp"
    assert patched.json()["env"] == {"T": MASK}
    for response in (created, got, listed, patched):
        assert SECRET not in response.text

    user = await api.user()
    for method, url, body in (
        ("POST", "/api/v1/mcp-servers", server_body()),
        ("GET", "/api/v1/mcp-servers", None),
        ("GET", path, None),
        ("PATCH", path, {"url": "https://evil.example.com/mcp"}),
        ("DELETE", path, None),
    ):
        refused = await http.request(method, url, json=body, headers=user.headers)
        assert refused.status_code == 403, (method, url, refused.text)

    assert (await http.delete(path, headers=admin.headers)).status_code == 200
    assert (await http.get(path, headers=admin.headers)).status_code == 404


async def test_bad_input_is_4xx_naming_the_field(http: httpx.AsyncClient, api: Api) -> None:
    admin = await api.admin()
    taken = server_body()
    assert (await http.post("/api/v1/mcp-servers", json=taken, headers=admin.headers)).status_code == 201
    for body, status, field in (
        (server_body(name="Not A Label"), 422, "name"),
        (server_body(transport="carrier-pigeon"), 422, "transport"),
        (server_body(url="ftp://kb"), 422, "url"),
        (server_body(surprise=1), 422, "surprise"),
        ({**taken}, 409, ""),
        (server_body(project_id="no-such-project"), 404, ""),
    ):
        response = await http.post("/api/v1/mcp-servers", json=body, headers=admin.headers)
        assert response.status_code == status, (body, response.text)
        assert field in response.text
    missing = await http.patch("/api/v1/mcp-servers/nope", json={"url": "http://x"}, headers=admin.headers)
    assert missing.status_code == 404


async def test_an_agent_type_names_servers_and_shows_no_inline_secret(
    http: httpx.AsyncClient, api: Api
) -> None:
    admin = await api.admin()
    slug = f"po-{suffix()}"
    created = await http.post(
        "/api/v1/agent-types",
        json={
            "name": "Product Owner Agent",
            "slug": slug,
            "primary_model": "claude-3-opus",
            # As the agent-platform suite writes it: a server that need not exist yet.
            "mcp_servers": [
                "knowledge-base",
                {"name": "gh", "transport": "stdio", "command": "gh-mcp", "env": {"GITHUB_TOKEN": SECRET}},
            ],
        },
        headers=admin.headers,
    )
    assert created.status_code == 201, created.text
    expected = [
        "knowledge-base",
        {
            "name": "gh", "transport": "stdio", "command": "gh-mcp", "args": [], "url": "",
            "env": {"GITHUB_TOKEN": MASK}, "headers": {},
        },
    ]  # fmt: skip
    assert created.json()["mcp_servers"] == expected
    user = await api.user()  # every signed-in user reads agent types: none sees the token
    by_slug = await http.get(f"/api/v1/agent-types/slug/{slug}", headers=user.headers)
    assert by_slug.json()["mcp_servers"] == expected and SECRET not in by_slug.text
    listed = await http.get("/api/v1/agent-types", params={"page_size": 1000}, headers=user.headers)
    assert SECRET not in listed.text

    bad = await http.post(
        "/api/v1/agent-types",
        json={"name": "x", "slug": f"x-{suffix()}", "primary_model": "mock", "mcp_servers": ["Not A Name"]},
        headers=admin.headers,
    )
    assert bad.status_code == 422 and "mcp_servers[0].name" in bad.text


async def test_the_public_grpc_serves_them_to_superusers_only(mesh: Mesh, api: Api) -> None:
    admin = await api.admin()
    user = await api.user()
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        await _through_the_gateway(channel, admin, user)


async def _through_the_gateway(channel: grpc.aio.Channel, admin: User, user: User) -> None:
    registry = RegistryServiceStub(channel)
    request = reg.CreateMcpServerRequest(
        mcp_server=resources_pb2.McpServer(
            name=f"grpc-{suffix()}", transport="stdio", command="srv", env={"TOKEN": SECRET}
        )
    )
    created = await registry.CreateMcpServer(request, metadata=bearer(admin.token))
    assert dict(created.mcp_server.env) == {"TOKEN": MASK}
    try:
        await registry.ListMcpServers(reg.ListMcpServersRequest(), metadata=bearer(user.token))
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    else:
        raise AssertionError("a plain user listed MCP servers")
    listed = await registry.ListMcpServers(
        reg.ListMcpServersRequest(page_size=1000), metadata=bearer(admin.token)
    )
    assert SECRET not in str(listed)
    try:
        await ireg_grpc.RegistryInternalServiceStub(channel).ResolveMcpServers(
            ireg.ResolveMcpServersRequest(agent_id="any"), metadata=bearer(admin.token)
        )
    except grpc.aio.AioRpcError as error:  # the one answer with secrets: never through the gateway
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    else:
        raise AssertionError("a superuser resolved MCP servers' secrets through the gateway")
