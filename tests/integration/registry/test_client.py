"""RegistryClient: every method against a real registry, and failures as typed errors."""

from __future__ import annotations

import pytest

from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from tests.integration.registry.support import PASSWORD, SUPERUSER_EMAIL, SUPERUSER_PASSWORD, bearer, strings


async def test_every_method(client: RegistryClient) -> None:
    root = bearer((await client.login(SUPERUSER_EMAIL, SUPERUSER_PASSWORD)).access_token)
    user = await client.register_user("carol@example.com", PASSWORD, first_name="Carol")
    tokens = await client.login("carol@example.com", PASSWORD)
    tokens = await client.refresh_tokens(tokens.refresh_token)
    me = bearer(tokens.access_token)
    assert (await client.get_current_user(metadata=me)) == user

    agent_type = await client.create_agent_type(
        res.AgentType(name="Helper", primary_model="mock", is_active=True), metadata=root
    )
    assert (await client.get_agent_type(slug="helper", metadata=me)) == agent_type
    assert (await client.get_agent_type(agent_type_id=agent_type.id, metadata=me)) == agent_type
    assert (await client.list_agent_types(metadata=me)).total_size == 1
    renamed = await client.update_agent_type(
        res.AgentType(id=agent_type.id, name="Helper 2"), ["name"], metadata=root
    )
    assert (renamed.name, renamed.slug) == ("Helper 2", "helper")
    with pytest.raises(PermissionDenied):
        await client.delete_agent_type(agent_type.id, metadata=me)

    project = await client.create_project(res.Project(name="Demo"), metadata=me)
    assert (await client.get_project(slug="demo", metadata=me)) == project
    assert (await client.list_projects(metadata=me)).total_size == 1
    project = await client.update_project(
        res.Project(id=project.id, description="d"), ["description"], metadata=me
    )
    assert project.description == "d"

    worker = await client.create_agent(
        res.Agent(project_id=project.id, agent_type_id=agent_type.id, name="worker"), metadata=me
    )
    with pytest.raises(AlreadyExists):
        await client.create_agent(
            res.Agent(project_id=project.id, agent_type_id=agent_type.id, name="worker"), metadata=me
        )
    with pytest.raises(InvalidArgument) as bad:
        await client.create_agent(
            res.Agent(
                project_id=project.id,
                agent_type_id=agent_type.id,
                name="boss",
                config=res.AgentConfig(network_access=strings("nobody")),
            ),
            metadata=me,
        )
    assert [v.field for v in bad.value.violations] == ["agent.config.network_access"]
    assert (await client.get_agent(project.id, worker.id, metadata=me)) == worker
    assert [a.id for a in (await client.list_agents(project.id, metadata=me)).agents] == [worker.id]
    updated = await client.update_agent(
        res.Agent(project_id=project.id, id=worker.id, config=res.AgentConfig(instructions="Work.")),
        ["config.instructions"],
        metadata=me,
    )
    assert updated.config.instructions == "Work."
    assert (await client.pause_agent(project.id, worker.id, metadata=me)).status == res.AGENT_STATUS_PAUSED
    with pytest.raises(FailedPrecondition) as paused:
        await client.pause_agent(project.id, worker.id, metadata=me)
    assert paused.value.reason == "INVALID_TRANSITION"
    assert (await client.resume_agent(project.id, worker.id, metadata=me)).status == res.AGENT_STATUS_IDLE
    assert (await client.get_agent_metrics(project.id, worker.id, metadata=me)).idle_instances == 1
    assert await client.delete_agent(project.id, worker.id, metadata=me) == "agent 'worker' terminated"

    await client.delete_project(project.id, metadata=me)
    with pytest.raises(NotFound):
        await client.get_project(project_id=project.id, metadata=me)
    await client.delete_agent_type(agent_type.id, metadata=root)
    await client.revoke_refresh_token(tokens.refresh_token)
