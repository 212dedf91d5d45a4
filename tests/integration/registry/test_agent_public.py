"""An agent's `public` flag through the registry's gRPC API: set at creation, changed by UpdateAgent
with the mask path `public` alone (no new version: nothing a run uses changed), and the published
agents of every project listed by ListPublicAgents for the system principal only."""

from __future__ import annotations

import grpc

from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Worker, rpc_error


async def test_public_is_set_changed_and_listed_for_the_system_only(
    client: RegistryClient, worker: Worker
) -> None:
    owner, project, private, system = worker.owner, worker.project, worker.agent, worker.system
    assert not private.public
    created = await client.stub.CreateAgent(
        pb.CreateAgentRequest(
            agent=res.Agent(
                project_id=project.id, agent_type_id=private.agent_type_id, name="greeter", public=True
            )
        ),
        metadata=owner.metadata,
    )
    published = created.agent
    assert published.public

    specs, token = await client.list_public_agents(metadata=system)
    assert [spec.agent.id for spec in specs] == [published.id] and token == ""
    assert specs[0].project_slug == project.slug
    denied = await rpc_error(client.list_public_agents(metadata=owner.metadata))
    assert denied.code == grpc.StatusCode.PERMISSION_DENIED

    versions = (await client.list_agent_versions(project.id, published.id, metadata=owner.metadata)).versions
    hidden = await client.update_agent(
        res.Agent(project_id=project.id, id=published.id, public=False), ["public"], metadata=owner.metadata
    )
    assert not hidden.public
    again = (await client.list_agent_versions(project.id, published.id, metadata=owner.metadata)).versions
    assert len(again) == len(versions)
    assert (await client.list_public_agents(metadata=system))[0] == []

    shown = await client.update_agent(
        res.Agent(project_id=project.id, id=private.id, public=True), ["public"], metadata=owner.metadata
    )
    assert shown.public and shown.config == private.config
    assert [s.agent.id for s in (await client.list_public_agents(metadata=system))[0]] == [private.id]
