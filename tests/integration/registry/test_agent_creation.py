"""Creating agents over gRPC: spawning and reading back, input validation, names and slugs,
idempotent and concurrent creates, and the references an agent may make to other agents and
projects."""

from __future__ import annotations

import asyncio

import grpc

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import (
    IDLE,
    PAUSED,
    Api,
    list_value,
    rpc_error,
    strings,
    violation_fields,
)

GRPC = grpc.StatusCode


async def test_spawn_get_and_list(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    agent = await api.agent(owner, project, "helper", agent_type=agent_type)
    assert agent.id
    assert (agent.name, agent.project_id, agent.agent_type_id, agent.status) == (
        "helper",
        project.id,
        agent_type.id,
        IDLE,
    )
    assert (agent.tasks_completed, agent.tokens_used, agent.cost) == (0, 0, 0.0)
    assert agent.created_at == agent.last_activity_at
    assert agent.config == res.AgentConfig()

    fetched = await stub.GetAgent(
        pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=owner.metadata
    )
    assert fetched.agent == agent
    others = [await api.agent(owner, project, f"a{i}", agent_type=agent_type) for i in range(4)]
    first = await stub.ListAgents(
        pb.ListAgentsRequest(project_id=project.id, page_size=2), metadata=owner.metadata
    )
    assert first.total_size == 5
    rest = await stub.ListAgents(
        pb.ListAgentsRequest(project_id=project.id, page_size=10, page_token=first.next_page_token),
        metadata=owner.metadata,
    )
    assert [a.id for a in [*first.agents, *rest.agents]] == [a.id for a in [agent, *others]]
    assert rest.next_page_token == ""
    page = await stub.ListAgents(
        pb.ListAgentsRequest(project_id=project.id, page_size=2, page=3), metadata=owner.metadata
    )
    assert [a.name for a in page.agents] == ["a3"]

    # A token for one project's list is refused for another's.
    other_project = await api.project(owner)
    error = await rpc_error(
        stub.ListAgents(
            pb.ListAgentsRequest(project_id=other_project.id, page_token=first.next_page_token),
            metadata=owner.metadata,
        )
    )
    assert error.reason == "INVALID_PAGE_TOKEN"


async def test_spawn_rejects_bad_input(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type()

    async def spawn(**fields: object):
        values = {"project_id": project.id, "agent_type_id": agent_type.id, "name": "ok"}
        values.update(fields)
        return await rpc_error(
            stub.CreateAgent(pb.CreateAgentRequest(agent=res.Agent(**values)), metadata=owner.metadata)
        )

    for name in ("", "   ", "a" * 101, "tab\there", "line\nbreak", "nul\x00", "bidi\u202eflip"):
        error = await spawn(name=name)
        assert (error.code, error.reason) == (GRPC.INVALID_ARGUMENT, "INVALID_ARGUMENT"), name
        assert violation_fields(error) == {"agent.name"}, name
    for slug in ("UPPER", "-lead", "trail-", "under_score", "a" * 64, "dot.ted", "spa ce"):
        error = await spawn(slug=slug)
        assert (error.code, error.reason) == (GRPC.INVALID_ARGUMENT, "INVALID_ARGUMENT"), slug
        assert violation_fields(error) == {"agent.slug"}, slug
    # A name no slug can be made from needs one given.
    assert violation_fields(await spawn(name="日本語")) == {"agent.slug"}
    assert violation_fields(await spawn(agent_type_id="", project_id="")) == {
        "agent.project_id",
        "agent.agent_type_id",
    }
    unknown_type = await spawn(agent_type_id="no-such-type")
    assert (unknown_type.code, unknown_type.reason) == (GRPC.NOT_FOUND, "AGENT_TYPE_NOT_FOUND")
    unknown_project = await spawn(project_id="no-such-project")
    assert (unknown_project.code, unknown_project.reason) == (GRPC.NOT_FOUND, "PROJECT_NOT_FOUND")
    bad_config = await spawn(
        config=res.AgentConfig(
            max_steps=0,
            max_iterations=-1,
            primary_model=" ",
            tools=strings("x", "x"),
            mock_responses=list_value("fine", {"content": "fine"}, 3),
        )
    )
    assert violation_fields(bad_config) == {
        "agent.config.max_steps",
        "agent.config.max_iterations",
        "agent.config.primary_model",
        "agent.config.tools",
        "agent.config.mock_responses",
    }
    # Names of 63 characters and single characters are fine.
    await api.agent(owner, project, "a" * 63, agent_type=agent_type)
    await api.agent(owner, project, "b", agent_type=agent_type)
    listed = await stub.ListAgents(pb.ListAgentsRequest(project_id=project.id), metadata=owner.metadata)
    assert listed.total_size == 2  # nothing stored by the failed spawns


async def test_inactive_types_cannot_be_spawned(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    inactive = await api.agent_type(is_active=False)
    error = await rpc_error(
        stub.CreateAgent(
            pb.CreateAgentRequest(
                agent=res.Agent(project_id=project.id, agent_type_id=inactive.id, name="x")
            ),
            metadata=owner.metadata,
        )
    )
    assert (error.code, error.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_TYPE_INACTIVE")


async def test_names_are_unique_per_project(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project, other_project = await api.project(owner), await api.project(owner)
    agent_type = await api.agent_type()
    await api.agent(owner, project, "worker", agent_type=agent_type)
    error = await rpc_error(api.agent(owner, project, "worker", agent_type=agent_type))
    assert (error.code, error.reason) == (GRPC.ALREADY_EXISTS, "AGENT_NAME_TAKEN")
    await api.agent(owner, other_project, "worker", agent_type=agent_type)  # another project: fine


async def test_names_are_display_text_and_slugs_address_agents_too(
    stub: pb_grpc.RegistryServiceStub, api: Api, internal_stub
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    po = await api.agent(owner, project, "  My PO Agent ", agent_type=agent_type)
    assert (po.name, po.slug) == ("My PO Agent", "my-po-agent")  # trimmed; slug made from it
    given = await stub.CreateAgent(
        pb.CreateAgentRequest(
            agent=res.Agent(project_id=project.id, agent_type_id=agent_type.id, name="Ünï Agent", slug="uni")
        ),
        metadata=owner.metadata,
    )
    assert (given.agent.name, given.agent.slug) == ("Ünï Agent", "uni")
    # Another name whose slug collides: 409 (ALREADY_EXISTS), nothing stored.
    collision = await rpc_error(api.agent(owner, project, "my po agent", agent_type=agent_type))
    assert (collision.code, collision.reason) == (GRPC.ALREADY_EXISTS, "AGENT_NAME_TAKEN")
    assert "my-po-agent" in collision.message
    # Everything that takes an agent takes its id, its slug or its exact name.
    for ref in (po.id, "my-po-agent", "My PO Agent"):
        got = await stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=ref), metadata=owner.metadata)
        assert got.agent == po, ref
        spec = await internal_stub.ResolveAgent(
            ipb.ResolveAgentRequest(project_slug=project.slug, agent_name=ref), metadata=owner.metadata
        )
        assert spec.spec.agent.id == po.id, ref
    missing = await rpc_error(
        stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id="my po agent"), metadata=owner.metadata)
    )
    assert (missing.code, missing.reason) == (GRPC.NOT_FOUND, "AGENT_NOT_FOUND")
    paused = await stub.PauseAgent(
        pb.PauseAgentRequest(project_id=project.id, id="My PO Agent"), metadata=owner.metadata
    )
    assert paused.agent.status == PAUSED
    resumed = await stub.ResumeAgent(
        pb.ResumeAgentRequest(project_id=project.id, id="my-po-agent"), metadata=owner.metadata
    )
    assert resumed.agent.status == IDLE
    # References to other agents take slugs and names; the spec names them by slug.
    boss = await api.agent(
        owner,
        project,
        "The Boss",
        agent_type=agent_type,
        config=res.AgentConfig(network_access=strings("My PO Agent", "uni")),
    )
    resolved = await internal_stub.ResolveAgent(
        ipb.ResolveAgentRequest(project_slug=project.slug, agent_name="The Boss"), metadata=owner.metadata
    )
    assert list(resolved.spec.network_access) == ["my-po-agent", "uni"]
    assert dict(resolved.spec.agent_names) == {"my-po-agent": "My PO Agent", "uni": "Ünï Agent"}
    assert list(boss.config.network_access.values) == ["My PO Agent", "uni"]  # stored as written
    ghost = await rpc_error(
        api.agent(
            owner,
            project,
            "Ghost",
            agent_type=agent_type,
            config=res.AgentConfig(sub_agents=strings("my po agent")),
        )
    )
    assert violation_fields(ghost) == {"agent.config.sub_agents"}


async def test_concurrent_spawns_of_one_name_exactly_one_wins(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    request = pb.CreateAgentRequest(
        agent=res.Agent(project_id=project.id, agent_type_id=agent_type.id, name="racer")
    )

    async def spawn() -> object:
        try:
            return await stub.CreateAgent(request, metadata=owner.metadata)
        except grpc.aio.AioRpcError as error:
            return error

    results = await asyncio.gather(*(spawn() for _ in range(10)))
    winners = [r for r in results if isinstance(r, pb.CreateAgentResponse)]
    losers = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(winners) == 1
    assert len(losers) == 9
    assert {error.code() for error in losers} == {GRPC.ALREADY_EXISTS}
    listed = await stub.ListAgents(pb.ListAgentsRequest(project_id=project.id), metadata=owner.metadata)
    assert [a.id for a in listed.agents] == [winners[0].agent.id]


async def test_create_with_request_id_is_idempotent(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    request = pb.CreateAgentRequest(
        agent=res.Agent(project_id=project.id, agent_type_id=agent_type.id, name="once"), request_id="spawn-1"
    )
    first = await stub.CreateAgent(request, metadata=owner.metadata)
    second = await stub.CreateAgent(request, metadata=owner.metadata)
    assert first.agent == second.agent


async def test_network_access_and_sub_agents_name_agents_of_the_project(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    project, elsewhere = await api.project(owner), await api.project(owner)
    agent_type = await api.agent_type()
    await api.agent(owner, project, "worker", agent_type=agent_type)
    await api.agent(owner, elsewhere, "outsider", agent_type=agent_type)

    for field in ("network_access", "sub_agents"):
        for names in (["ghost"], ["worker", "outsider"], ["Bad_Name"], ["boss"]):
            config = res.AgentConfig(**{field: strings(*names)})
            error = await rpc_error(api.agent(owner, project, "boss", agent_type=agent_type, config=config))
            assert (error.code, error.reason) == (GRPC.INVALID_ARGUMENT, "INVALID_ARGUMENT"), (field, names)
            assert violation_fields(error) == {f"agent.config.{field}"}, (field, names)
    ghost = await rpc_error(
        api.agent(
            owner,
            project,
            "boss",
            agent_type=agent_type,
            config=res.AgentConfig(network_access=strings("ghost")),
        )
    )
    assert "'ghost'" in ghost.violations[0].description

    boss = await api.agent(
        owner,
        project,
        "boss",
        agent_type=agent_type,
        config=res.AgentConfig(network_access=strings("worker"), sub_agents=strings("worker")),
    )
    assert list(boss.config.network_access.values) == ["worker"]
    # An explicitly empty list is kept apart from "not set".
    loner = await api.agent(
        owner, project, "loner", agent_type=agent_type, config=res.AgentConfig(network_access=strings())
    )
    assert loner.config.HasField("network_access") and not loner.config.HasField("sub_agents")


async def test_agent_must_belong_to_the_named_project(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project, other = await api.project(owner), await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    error = await rpc_error(
        stub.GetAgent(pb.GetAgentRequest(project_id=other.id, id=agent.id), metadata=owner.metadata)
    )
    assert (error.code, error.reason) == (GRPC.NOT_FOUND, "AGENT_NOT_FOUND")
    error = await rpc_error(
        stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=""), metadata=owner.metadata)
    )
    assert violation_fields(error) == {"id"}
