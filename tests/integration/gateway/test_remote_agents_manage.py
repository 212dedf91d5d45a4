"""Managing remote A2A agents: update (REST PATCH, gRPC UpdateRemoteAgent) with the
credential still write-only — a masked credential sent back keeps the stored one, a new one
replaces it —, and lists paged like every other list (page/page_size over REST, page_token over
gRPC). On both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
import pytest_asyncio
from google.protobuf import field_mask_pb2

from agentmesh.cli.mesh import Mesh
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from tests.bearer import authorized_channel
from tests.integration.gateway.support import Api
from tests.mesh import bearer


@pytest_asyncio.fixture(loop_scope="package")
async def registry(mesh: Mesh) -> AsyncIterator[reg_grpc.RegistryServiceStub]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield reg_grpc.RegistryServiceStub(channel)


async def stored_credential(mesh: Mesh, project_id: str, name: str) -> str:
    """What the executors get (the registry's internal answer, system principal only)."""
    async with authorized_channel(mesh.services["registry"].address) as channel:
        response = await internal_grpc.RegistryInternalServiceStub(channel).ResolveRemoteAgent(
            internal_pb.ResolveRemoteAgentRequest(project_id=project_id, name=name)
        )
    return response.remote_agent.credential


async def test_patch_changes_the_fields_given_and_keeps_a_masked_credential(
    api: Api, http: httpx.AsyncClient, mesh: Mesh
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    remotes = f"/api/v1/projects/{project['id']}/remote-agents"
    body = {"name": "far", "card_url": "https://example.invalid/card", "credential": "first-secret"}
    made = (await http.post(remotes, json=body, headers=owner.headers)).json()
    one = f"{remotes}/{made['id']}"

    # A read-modify-write sends the mask back: the credential stays.
    patched = await http.patch(one, json={**made, "description": "now described"}, headers=owner.headers)
    assert patched.status_code == 422  # id, project_id and created_at are not fields of an update
    patched = await http.patch(
        one, json={"description": "now described", "credential": "********"}, headers=owner.headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["description"] == "now described" and patched.json()["credential"] == "********"
    assert await stored_credential(mesh, project["id"], "far") == "first-secret"

    renamed = await http.patch(
        one, json={"name": "farther", "credential": "second-secret"}, headers=owner.headers
    )
    assert renamed.status_code == 200, renamed.text
    assert "second-secret" not in renamed.text and renamed.json()["name"] == "farther"
    assert await stored_credential(mesh, project["id"], "farther") == "second-secret"
    assert (await http.patch(one, json={"credential": ""}, headers=owner.headers)).json()["credential"] == ""

    bad = await http.patch(one, json={"card_url": "file:///etc/passwd"}, headers=owner.headers)
    assert bad.status_code in (400, 422) and "card_url" in bad.text
    await api.agent(owner, name="taken", project={"id": project["id"], "slug": project["slug"]})
    clash = await http.patch(one, json={"name": "taken"}, headers=owner.headers)
    assert clash.status_code == 409, clash.text
    missing = await http.patch(f"{remotes}/no-such-id", json={"description": "x"}, headers=owner.headers)
    assert missing.status_code == 404
    stranger = await api.user()
    refused = await http.patch(one, json={"description": "mine"}, headers=stranger.headers)
    assert refused.status_code in (403, 404)


async def test_update_over_grpc_names_the_fields_it_changes(
    api: Api, registry: reg_grpc.RegistryServiceStub
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    created = await registry.CreateRemoteAgent(
        reg.CreateRemoteAgentRequest(
            remote_agent=resources_pb2.RemoteAgent(
                project_id=project["id"], name="far", card_url="https://example.invalid/card"
            )
        ),
        metadata=bearer(owner.token),
    )
    given = resources_pb2.RemoteAgent(
        id=created.remote_agent.id, project_id=project["id"], card_url="https://example.invalid/new"
    )
    updated = await registry.UpdateRemoteAgent(
        reg.UpdateRemoteAgentRequest(
            remote_agent=given, update_mask=field_mask_pb2.FieldMask(paths=["card_url"])
        ),
        metadata=bearer(owner.token),
    )
    assert (updated.remote_agent.name, updated.remote_agent.card_url) == (
        "far",
        "https://example.invalid/new",
    )
    for paths in ([], ["project_id"], ["nonsense"]):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await registry.UpdateRemoteAgent(
                reg.UpdateRemoteAgentRequest(
                    remote_agent=given, update_mask=field_mask_pb2.FieldMask(paths=paths)
                ),
                metadata=bearer(owner.token),
            )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "update_mask" in (refused.value.details() or "")


async def test_remote_agent_lists_are_paged(
    api: Api, http: httpx.AsyncClient, registry: reg_grpc.RegistryServiceStub
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    remotes = f"/api/v1/projects/{project['id']}/remote-agents"
    for name in ("a1", "a2", "a3"):
        made = await http.post(
            remotes, json={"name": name, "card_url": f"https://example.invalid/{name}"}, headers=owner.headers
        )
        assert made.status_code == 201, made.text

    first = (await http.get(remotes, params={"page_size": 2}, headers=owner.headers)).json()
    second = (await http.get(remotes, params={"page_size": 2, "page": 2}, headers=owner.headers)).json()
    assert [r["name"] for r in first["data"]] + [r["name"] for r in second["data"]] == ["a1", "a2", "a3"]
    assert first["pagination"]["total"] == 3
    assert (await http.get(remotes, params={"page_size": 0}, headers=owner.headers)).status_code == 422

    names: list[str] = []
    token = ""
    while True:
        page = await registry.ListRemoteAgents(
            reg.ListRemoteAgentsRequest(project_id=project["id"], page_size=2, page_token=token),
            metadata=bearer(owner.token),
        )
        names += [r.name for r in page.remote_agents]
        assert page.total_size == 3
        token = page.next_page_token
        if not token:
            break
    assert names == ["a1", "a2", "a3"]
    with pytest.raises(grpc.aio.AioRpcError) as bad_token:
        await registry.ListRemoteAgents(
            reg.ListRemoteAgentsRequest(project_id=project["id"], page_token="forged"),
            metadata=bearer(owner.token),
        )
    assert bad_token.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_address_the_egress_policy_refuses_is_refused_when_registered(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    """The registry applies the executors' egress policy when a URL is given: the cloud's metadata
    service, a private or unique-local address is refused at once, naming the field, rather than
    stored and refused at every fetch. This mesh's operator allows loopback: that is registered."""
    owner, admin = await api.user(), await api.admin()
    project = await api.project(owner)
    remotes = f"/api/v1/projects/{project['id']}/remote-agents"
    for url in ("http://169.254.169.254/latest/meta-data", "http://10.0.0.7/card"):
        refused = await http.post(remotes, json={"name": "far", "card_url": url}, headers=owner.headers)
        assert refused.status_code == 422, refused.text
        (violation,) = refused.json()["field_violations"]
        assert violation["field"].endswith("card_url"), violation
        assert "is not an address this mesh may reach" in violation["description"], violation
    made = await http.post(
        remotes, json={"name": "near", "card_url": "http://127.0.0.1:1/card"}, headers=owner.headers
    )
    assert made.status_code == 201, made.text
    moved = await http.patch(
        f"{remotes}/{made.json()['id']}", json={"card_url": "http://[fd00::7]/card"}, headers=owner.headers
    )
    assert moved.status_code == 422 and "card_url" in moved.text, moved.text
    server = {"name": "intranet-kb", "transport": "streamable_http", "url": "http://192.168.1.5/mcp"}
    refused = await http.post("/api/v1/mcp-servers", json=server, headers=admin.headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["field_violations"][0]["field"].endswith("url"), refused.text
