"""Outbound A2A: a project registers a remote A2A agent (card URL, write-only credential), an agent
whose network names it delegates to it, and the delegation goes over A2A — here to an a2a-sdk
sample server the test starts on loopback — recorded with the same delegation_request /
delegation_response events, the credential sent to the remote and never shown back, the trace
context propagated."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_grpc
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from tests.integration.gateway.a2a_sample import SampleServer, sample_server
from tests.integration.gateway.support import Api
from tests.mesh import bearer

SECRET = "remote-secret-token-1234"
DELEGATE_REMOTE = {
    "content": "",
    "tool_calls": [{"name": "delegate", "arguments": {"agent": "translator", "task": "say hello in French"}}],
}


@pytest_asyncio.fixture(loop_scope="package")
async def remote() -> AsyncIterator[SampleServer]:
    async with sample_server() as server:
        yield server


@pytest_asyncio.fixture(loop_scope="package")
async def registry(mesh: Mesh) -> AsyncIterator[reg_grpc.RegistryServiceStub]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield reg_grpc.RegistryServiceStub(channel)


async def test_an_agent_delegates_to_a_registered_remote_a2a_agent(
    api: Api,
    http: httpx.AsyncClient,
    registry: reg_grpc.RegistryServiceStub,
    remote: SampleServer,
    spans: object,  # tracing on (in-memory exporter), so there is a trace context to propagate
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    remotes = f"/api/v1/projects/{project['id']}/remote-agents"
    body = {"name": "translator", "card_url": remote.url, "credential": SECRET}
    created = await http.post(remotes, json=body, headers=owner.headers)
    assert created.status_code == 201, created.text
    assert created.json()["credential"] == "********"
    listed = await registry.ListRemoteAgents(
        reg.ListRemoteAgentsRequest(project_id=project["id"]), metadata=bearer(owner.token)
    )
    assert [(r.name, r.credential) for r in listed.remote_agents] == [("translator", "********")]
    got = await http.get(f"{remotes}/{created.json()['id']}", headers=owner.headers)
    assert got.json()["card_url"] == remote.url and SECRET not in got.text

    coordinator = await api.agent(
        owner,
        name="coordinator",
        project={"id": project["id"], "slug": project["slug"]},
        network_access=["translator"],
        mock_responses=[DELEGATE_REMOTE, "done"],
    )
    response = await http.post(
        f"{coordinator.base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "go"}]},
        headers={**owner.headers, "X-Session-Id": "remote-a2a"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "done"

    events = await api.session_events(coordinator, "remote-a2a")
    kinds = [e["event_type"] for e in events]
    assert kinds == ["user_message", "delegation_request", "delegation_response", "agent_response"]
    answer = next(e for e in events if e["event_type"] == "delegation_response")
    assert "remote says: bonjour (say hello in French)" in answer["content"]
    assert answer["metadata"]["outcome"] == "completed"
    request = next(e for e in events if e["event_type"] == "delegation_request")
    assert answer["delegation_id"] == request["delegation_id"]

    headers = remote.agent.seen_headers[-1]
    assert headers.get("authorization") == f"Bearer {SECRET}"
    assert headers.get("traceparent", "").split("-")[1] == request["trace_id"]
    assert all(SECRET not in str(e) for e in events)


async def test_remote_agents_are_checked_and_their_names_are_the_projects(
    api: Api, registry: reg_grpc.RegistryServiceStub, mesh: Mesh
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    taken = await api.agent(owner, name="helper", project={"id": project["id"], "slug": project["slug"]})

    async def create(**fields: str) -> grpc.StatusCode:
        remote_agent = resources_pb2.RemoteAgent(project_id=project["id"], **fields)
        try:
            await registry.CreateRemoteAgent(
                reg.CreateRemoteAgentRequest(remote_agent=remote_agent), metadata=bearer(owner.token)
            )
        except grpc.aio.AioRpcError as error:
            assert error.details()
            return error.code()
        return grpc.StatusCode.OK

    assert (
        await create(name="Not A Label", card_url="http://127.0.0.1:1/card")
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert await create(name="ok", card_url="ftp://example.invalid/card") == grpc.StatusCode.INVALID_ARGUMENT
    assert await create(name=taken.name, card_url="http://127.0.0.1:1/card") == grpc.StatusCode.ALREADY_EXISTS
    assert await create(name="far", card_url="http://127.0.0.1:1/card") == grpc.StatusCode.OK
    assert await create(name="far", card_url="http://127.0.0.1:1/card") == grpc.StatusCode.ALREADY_EXISTS

    stranger = await api.user()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await registry.ListRemoteAgents(
            reg.ListRemoteAgentsRequest(project_id=project["id"]), metadata=bearer(stranger.token)
        )
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    # The one answer with the credential is internal: the gateway does not serve it at all.
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        internal = internal_grpc.RegistryInternalServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as not_served:
            await internal.ResolveRemoteAgent(
                internal_pb.ResolveRemoteAgentRequest(project_id=project["id"], name="far"),
                metadata=bearer(owner.token),
            )
    assert not_served.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_remote_agents_over_rest(api: Api, http: httpx.AsyncClient) -> None:
    owner = await api.user()
    project = await api.project(owner)
    remotes = f"/api/v1/projects/{project['id']}/remote-agents"
    bad = await http.post(
        remotes, json={"name": "x", "card_url": "file:///etc/passwd"}, headers=owner.headers
    )
    assert bad.status_code in (400, 422) and "card_url" in bad.text
    made = await http.post(
        remotes, json={"name": "x", "card_url": "https://example.invalid/card"}, headers=owner.headers
    )
    assert made.status_code == 201 and made.json()["credential"] == ""
    again = await http.post(
        remotes, json={"name": "x", "card_url": "https://example.invalid/c"}, headers=owner.headers
    )
    assert again.status_code == 409
    stranger = await api.user()
    assert (await http.get(remotes, headers=stranger.headers)).status_code in (403, 404)
    gone = await http.delete(f"{remotes}/{made.json()['id']}", headers=owner.headers)
    assert gone.status_code == 200
    assert (await http.get(f"{remotes}/{made.json()['id']}", headers=owner.headers)).status_code == 404
    assert (await http.get(remotes, headers=owner.headers)).json()["data"] == []


async def test_an_agent_delegates_to_another_meshs_agent_over_a2a(
    api: Api, http: httpx.AsyncClient, mesh: Mesh
) -> None:
    """The remote is an agentmesh agent reached through its A2A card (here the same gateway,
    another owner's project): outbound and inbound A2A meet."""
    far_owner = await api.user()
    far = await api.agent(far_owner, name="far-worker", mock_responses=["from far away"])
    owner = await api.user()
    project = await api.project(owner)
    card_url = f"{mesh.gateway.http.url}{far.base}/.well-known/agent-card.json"  # type: ignore[attr-defined]
    body = {"name": "far", "card_url": card_url, "credential": far_owner.token}
    created = await http.post(
        f"/api/v1/projects/{project['id']}/remote-agents", json=body, headers=owner.headers
    )
    assert created.status_code == 201, created.text
    delegate = {
        "content": "",
        "tool_calls": [{"name": "delegate", "arguments": {"agent": "far", "task": "ping"}}],
    }
    coordinator = await api.agent(
        owner,
        name="coordinator",
        project={"id": project["id"], "slug": project["slug"]},
        network_access=["far"],
        mock_responses=[delegate, "done"],
    )
    response = await http.post(
        f"{coordinator.base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "go"}]},
        headers={**owner.headers, "X-Session-Id": "to-far"},
    )
    assert response.status_code == 200, response.text
    events = await api.session_events(coordinator, "to-far")
    answer = next(e for e in events if e["event_type"] == "delegation_response")
    assert answer["metadata"]["outcome"] == "completed", answer
    assert "from far away" in answer["content"]
    # On the far side it is an A2A task of the far agent, in its own project's log.
    listed = await http.get(f"{far.base}/a2a/rest/tasks", headers={**far_owner.headers, "A2A-Version": "1.0"})
    assert listed.status_code == 200, listed.text
    [task] = listed.json()["tasks"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
