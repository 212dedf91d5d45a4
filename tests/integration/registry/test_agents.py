"""Agents over gRPC: spawning, config overrides, the lifecycle of DESIGN §3, usage, resolution
into what an executor runs, and the executor pool."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import field_mask_pb2, json_format, struct_pb2

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.errors import FailedPrecondition, NotFound
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import (
    Api,
    Caller,
    bearer,
    rpc_error,
    strings,
    violation_fields,
)

GRPC = grpc.StatusCode
IDLE, WORKING, PAUSED, TERMINATED = (
    res.AGENT_STATUS_IDLE,
    res.AGENT_STATUS_WORKING,
    res.AGENT_STATUS_PAUSED,
    res.AGENT_STATUS_TERMINATED,
)


def _list(*items: object) -> struct_pb2.ListValue:
    value = struct_pb2.ListValue()
    value.extend(list(items))
    return value


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
            mock_responses=_list("fine", {"content": "fine"}, 3),
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


async def test_lifecycle(stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    ids = {"project_id": project.id, "id": agent.id}
    md = owner.metadata

    async def status() -> int:
        return (await stub.GetAgent(pb.GetAgentRequest(**ids), metadata=md)).agent.status

    # idle → paused → idle
    assert (await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)).agent.status == PAUSED
    paused_twice = await rpc_error(stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md))
    assert (paused_twice.code, paused_twice.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")
    assert (await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)).agent.status == IDLE
    not_paused = await rpc_error(stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md))
    assert (not_paused.code, not_paused.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")

    # idle ⇄ working while a run is in flight; working → paused → (resume) working, then idle.
    started = await client.start_agent_run(agent.id, "run-1", metadata=md)
    assert started.agent.status == WORKING
    assert (await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)).agent.status == PAUSED
    refused = await rpc_error(client.start_agent_run(agent.id, "run-2", metadata=md))
    assert (refused.code, refused.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_PAUSED")
    assert (await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)).agent.status == WORKING
    finished = await client.finish_agent_run(agent.id, "run-1", completed=True, metadata=md)
    assert finished.status == IDLE

    # any → terminated (final)
    deleted = await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=md)
    assert deleted.message == "agent 'worker' terminated"
    assert await status() == TERMINATED
    for call in (
        stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md),
        stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (GRPC.FAILED_PRECONDITION, "INVALID_TRANSITION")
    try:
        await client.start_agent_run(agent.id, "run-3", metadata=md)
        raise AssertionError("a terminated agent started a run")
    except FailedPrecondition as error:
        assert error.reason == "AGENT_TERMINATED"
    # Terminating again changes nothing.
    await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=md)
    assert await status() == TERMINATED
    # Its name stays taken.
    taken = await rpc_error(api.agent(owner, project, "worker"))
    assert taken.reason == "AGENT_NAME_TAKEN"


async def test_paused_agents_can_be_terminated(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    ids = {"project_id": project.id, "id": agent.id}
    await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=owner.metadata)
    await stub.DeleteAgent(pb.DeleteAgentRequest(**ids), metadata=owner.metadata)
    got = await stub.GetAgent(pb.GetAgentRequest(**ids), metadata=owner.metadata)
    assert got.agent.status == TERMINATED


async def test_runs_count_usage_and_overlap(
    api: Api, client: RegistryClient, stub: pb_grpc.RegistryServiceStub
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata

    assert (await client.start_agent_run(agent.id, "a", metadata=md)).agent.status == WORKING
    assert (await client.start_agent_run(agent.id, "b", metadata=md)).agent.status == WORKING
    # A retried start is counted once.
    assert (await client.start_agent_run(agent.id, "b", metadata=md)).agent.status == WORKING
    after_a = await client.finish_agent_run(
        agent.id, "a", completed=True, tokens_used=100, cost=0.5, metadata=md
    )
    assert after_a.status == WORKING  # b is still running
    after_b = await client.finish_agent_run(
        agent.id, "b", completed=False, tokens_used=20, cost=0.25, metadata=md
    )
    assert after_b.status == IDLE
    assert (after_b.tasks_completed, after_b.tokens_used, after_b.cost) == (1, 120, 0.75)
    # A retried finish adds nothing.
    again = await client.finish_agent_run(
        agent.id, "b", completed=True, tokens_used=20, cost=0.25, metadata=md
    )
    assert (again.tasks_completed, again.tokens_used, again.cost, again.status) == (1, 120, 0.75, IDLE)
    assert again.last_activity_at.ToDatetime() >= agent.last_activity_at.ToDatetime()

    metrics = await stub.GetAgentMetrics(
        pb.GetAgentMetricsRequest(project_id=project.id, id=agent.id), metadata=md
    )
    assert metrics == pb.GetAgentMetricsResponse(
        total_instances=1,
        active_instances=0,
        idle_instances=1,
        total_tasks_completed=1,
        total_tokens_used=120,
        total_cost_incurred=0.75,
    )
    await client.start_agent_run(agent.id, "c", metadata=md)
    working = await stub.GetAgentMetrics(
        pb.GetAgentMetricsRequest(project_id=project.id, id=agent.id), metadata=md
    )
    assert (working.active_instances, working.idle_instances) == (1, 0)

    # Finishing after termination adds the usage but the agent stays terminated.
    await stub.DeleteAgent(pb.DeleteAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    final = await client.finish_agent_run(agent.id, "c", completed=True, tokens_used=5, metadata=md)
    assert (final.status, final.tasks_completed, final.tokens_used) == (TERMINATED, 2, 125)


async def test_run_calls_validate(
    api: Api, stub: pb_grpc.RegistryServiceStub, client: RegistryClient, internal_stub
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata
    error = await rpc_error(
        internal_stub.StartAgentRun(ipb.StartAgentRunRequest(agent_id=agent.id), metadata=md)
    )
    assert violation_fields(error) == {"run_id"}
    error = await rpc_error(
        internal_stub.FinishAgentRun(
            ipb.FinishAgentRunRequest(agent_id=agent.id, run_id="r", tokens_used=-1, cost=-0.1), metadata=md
        )
    )
    assert violation_fields(error) == {"tokens_used", "cost"}
    try:
        await client.start_agent_run("no-such-agent", "r", metadata=md)
        raise AssertionError("started a run of a missing agent")
    except NotFound as missing:
        assert missing.reason == "AGENT_NOT_FOUND"


async def test_update_agent_config(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    await api.agent(owner, project, "worker")
    agent = await api.agent(
        owner, project, "boss", config=res.AgentConfig(instructions="Lead.", max_steps=3, tools=strings("t1"))
    )
    md = owner.metadata

    async def update(config: res.AgentConfig, *paths: str, agent_id: str = agent.id) -> res.Agent:
        request = pb.UpdateAgentRequest(
            agent=res.Agent(project_id=project.id, id=agent_id, config=config),
            update_mask=field_mask_pb2.FieldMask(paths=paths),
        )
        return (await stub.UpdateAgent(request, metadata=md)).agent

    changed = await update(
        res.AgentConfig(network_access=strings("worker"), instructions="ignored"), "config.network_access"
    )
    assert changed.config.instructions == "Lead."
    assert changed.config.max_steps == 3
    assert list(changed.config.network_access.values) == ["worker"]
    # Named in the mask but not set: the override is cleared (the type's value applies).
    cleared = await update(res.AgentConfig(), "config.instructions")
    assert not cleared.config.HasField("instructions")
    assert cleared.config.max_steps == 3
    # "config" replaces all overrides.
    replaced = await update(res.AgentConfig(primary_model="openai/gpt-4o"), "config")
    assert replaced.config == res.AgentConfig(primary_model="openai/gpt-4o")

    bad = await rpc_error(update(res.AgentConfig(network_access=strings("ghost")), "config.network_access"))
    assert violation_fields(bad) == {"agent.config.network_access"}
    bad_mask = await rpc_error(update(res.AgentConfig(), "name"))
    assert violation_fields(bad_mask) == {"update_mask"}
    empty_mask = await rpc_error(update(res.AgentConfig()))
    assert violation_fields(empty_mask) == {"update_mask"}
    got = await stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    assert got.agent == replaced

    await stub.DeleteAgent(pb.DeleteAgentRequest(project_id=project.id, id=agent.id), metadata=md)
    terminated = await rpc_error(update(res.AgentConfig(instructions="x"), "config.instructions"))
    assert (terminated.code, terminated.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_TERMINATED")


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


async def test_resolve_merges_type_and_overrides(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, codec: TokenCodec
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    params = struct_pb2.Struct()
    params.update({"temperature": 0.1, "max_tokens": 256})
    agent_type = await api.agent_type(
        description="Plans work",
        expertise=["planning"],
        personality_prompt="Type prompt",
        primary_model="openai/gpt-4o-mini",
        fallback_models=["mock"],
        model_params=params,
        tools=["exit_loop"],
        mcp_servers=[res.McpServer(name="fs", transport="stdio", command="mcp-fs")],
        kind=res.AGENT_KIND_LLM,
        sub_agents=[],
        max_steps=6,
        max_iterations=2,
    )
    await api.agent(owner, project, "worker", agent_type=agent_type)
    plain = await client.resolve_agent(project.slug, "worker", metadata=owner.metadata)
    assert (plain.instructions, plain.primary_model, plain.max_steps, plain.max_iterations) == (
        "Type prompt",
        "openai/gpt-4o-mini",
        6,
        2,
    )
    assert json_format.MessageToDict(plain.model_params) == {"temperature": 0.1, "max_tokens": 256}
    assert (list(plain.tools), list(plain.network_access), list(plain.mock_responses.values)) == (
        ["exit_loop"],
        [],
        [],
    )
    assert (plain.project_slug, plain.description, list(plain.expertise)) == (
        project.slug,
        "Plans work",
        ["planning"],
    )
    assert [s.name for s in plain.mcp_servers] == ["fs"]
    assert list(plain.fallback_models) == ["mock"]
    assert plain.kind == res.AGENT_KIND_LLM

    overrides = struct_pb2.Struct()
    overrides.update({"temperature": 0.9})
    mock = _list("plain answer", {"content": "", "tool_calls": [{"name": "exit_loop", "arguments": {}}]})
    boss = await api.agent(
        owner,
        project,
        "boss",
        agent_type=agent_type,
        config=res.AgentConfig(
            instructions="Boss prompt",
            primary_model="mock",
            model_params=overrides,
            max_steps=2,
            max_iterations=0,
            tools=strings(),
            sub_agents=strings("worker"),
            network_access=strings("worker"),
            mock_responses=mock,
        ),
    )
    spec = await client.resolve_agent(project.slug, "boss", metadata=owner.metadata)
    assert spec.agent == boss
    assert (spec.instructions, spec.primary_model, spec.max_steps, spec.max_iterations) == (
        "Boss prompt",
        "mock",
        2,
        0,
    )
    assert json_format.MessageToDict(spec.model_params) == {"temperature": 0.9}
    assert (list(spec.tools), list(spec.sub_agents), list(spec.network_access)) == (
        [],
        ["worker"],
        ["worker"],
    )
    assert json_format.MessageToDict(spec.mock_responses) == json_format.MessageToDict(mock)

    # The system principal may resolve too; others learn nothing.
    system = await client.resolve_agent(project.slug, "boss", metadata=bearer(codec.system_token()))
    assert system == spec
    stranger = await api.sign_up()
    for slug, name in ((project.slug, "boss"), (project.slug, "ghost"), ("no-such-project", "boss")):
        try:
            await client.resolve_agent(slug, name, metadata=stranger.metadata)
            raise AssertionError("resolved")
        except NotFound:
            pass
    try:
        await client.resolve_agent(project.slug, "ghost", metadata=owner.metadata)
        raise AssertionError("resolved")
    except NotFound as error:
        assert error.reason == "AGENT_NOT_FOUND"


async def test_executor_pool(client: RegistryClient, api: Api, codec: TokenCodec) -> None:
    system = bearer(codec.system_token())
    registered = await client.register_executor("exec-1", "127.0.0.1:7001", metadata=system)
    assert (registered.id, registered.address) == ("exec-1", "127.0.0.1:7001")
    await client.register_executor("exec-2", "127.0.0.1:7002", metadata=system)
    # A heartbeat refreshes, and may move the address.
    await client.register_executor("exec-1", "127.0.0.1:7003", metadata=system)
    executors = await client.list_executors(metadata=system)
    assert [(e.id, e.address) for e in executors] == [
        ("exec-1", "127.0.0.1:7003"),
        ("exec-2", "127.0.0.1:7002"),
    ]
    root = await api.root()
    assert len(await client.list_executors(metadata=root.metadata)) == 2

    user = await api.sign_up()
    for call in (
        client.register_executor("evil", "10.0.0.1:1", metadata=user.metadata),
        client.register_executor("evil", "10.0.0.1:1", metadata=root.metadata),
        client.list_executors(metadata=user.metadata),
    ):
        error = await rpc_error(call)
        assert error.code == GRPC.PERMISSION_DENIED
    bad = await rpc_error(client.register_executor("", "", metadata=system))
    assert violation_fields(bad) == {"executor.id", "executor.address"}


async def test_concurrent_runs_are_all_counted(api: Api, client: RegistryClient) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(owner, project, "worker")
    md = owner.metadata
    runs = [f"run-{i}" for i in range(10)]
    await asyncio.gather(*(client.start_agent_run(agent.id, run, metadata=md) for run in runs))
    finished = await asyncio.gather(
        *(client.finish_agent_run(agent.id, run, completed=True, tokens_used=10, metadata=md) for run in runs)
    )
    assert sum(a.status == IDLE for a in finished) == 1  # only the last one leaves it idle
    final = await client.finish_agent_run(agent.id, "run-0", completed=True, metadata=md)  # a retry
    assert (final.status, final.tasks_completed, final.tokens_used) == (IDLE, 10, 100)


async def test_the_spec_revision_moves_only_when_the_spec_may_change(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    agent_type = await api.agent_type(personality_prompt="Before")
    agent = await api.agent(owner, project, "worker", agent_type=agent_type)
    md = owner.metadata

    async def resolved() -> str:
        return (await client.resolve_agent(project.slug, "worker", metadata=md)).revision

    async def started(run_id: str) -> str:
        revision = (await client.start_agent_run(agent.id, run_id, metadata=md)).spec_revision
        await client.finish_agent_run(agent.id, run_id, completed=True, tokens_used=5, metadata=md)
        return revision

    first = await resolved()
    assert first and await started("a") == first
    # Runs, usage and pausing are not part of the spec.
    ids = {"project_id": project.id, "id": agent.id}
    await stub.PauseAgent(pb.PauseAgentRequest(**ids), metadata=md)
    await stub.ResumeAgent(pb.ResumeAgentRequest(**ids), metadata=md)
    assert await resolved() == first and await started("b") == first

    overrides = res.Agent(project_id=project.id, id=agent.id, config=res.AgentConfig(instructions="Now"))
    mask = field_mask_pb2.FieldMask(paths=["config.instructions"])
    await stub.UpdateAgent(pb.UpdateAgentRequest(agent=overrides, update_mask=mask), metadata=md)
    second = await started("c")
    assert second != first and await resolved() == second

    root = await api.root()
    changed_type = res.AgentType(id=agent_type.id, personality_prompt="After")
    await stub.UpdateAgentType(
        pb.UpdateAgentTypeRequest(
            agent_type=changed_type, update_mask=field_mask_pb2.FieldMask(paths=["personality_prompt"])
        ),
        metadata=root.metadata,
    )
    third = await resolved()
    assert third not in (first, second) and await started("d") == third


async def test_finish_agent_runs_finishes_each_run_on_its_own(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient, internal_stub
) -> None:
    owner: Caller = await api.sign_up()
    project = await api.project(owner)
    first = await api.agent(owner, project, "first")
    second = await api.agent(owner, project, "second")
    md = owner.metadata
    for agent, run in ((first, "a"), (first, "b"), (second, "c")):
        await client.start_agent_run(agent.id, run, metadata=md)

    def run(agent_id: str, run_id: str, **usage: object) -> ipb.FinishAgentRunRequest:
        return ipb.FinishAgentRunRequest(agent_id=agent_id, run_id=run_id, completed=True, **usage)

    batch = [
        run(first.id, "a", tokens_used=10, cost=0.5),
        run("no-such-agent", "x"),
        run(second.id, "c", tokens_used=-1),
        run(first.id, "b", tokens_used=5),
        run(second.id, "c", tokens_used=7),
    ]
    results = await client.finish_agent_runs(batch, metadata=md)
    assert [(r.error_code, r.error_reason) for r in results] == [
        ("", ""),
        ("NOT_FOUND", "AGENT_NOT_FOUND"),
        ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        ("", ""),
        ("", ""),
    ]
    assert "tokens_used" in results[2].error_message
    assert not results[1].HasField("agent")
    assert (results[0].agent.status, results[3].agent.status, results[4].agent.status) == (
        WORKING,
        IDLE,
        IDLE,
    )
    assert (results[3].agent.tasks_completed, results[3].agent.tokens_used) == (2, 15)

    # A retried batch changes nothing; another caller's agents are not found.
    again = await client.finish_agent_runs(batch[:1] + batch[3:], metadata=md)
    assert [r.agent.tokens_used for r in again] == [15, 15, 7]
    stranger = await api.sign_up()
    (hidden,) = await client.finish_agent_runs([run(first.id, "z")], metadata=stranger.metadata)
    assert hidden.error_code == "NOT_FOUND"

    too_many = ipb.FinishAgentRunsRequest(runs=[run(first.id, f"r{i}") for i in range(1001)])
    error = await rpc_error(internal_stub.FinishAgentRuns(too_many, metadata=md))
    assert error.code == GRPC.INVALID_ARGUMENT and violation_fields(error) == {"runs"}
