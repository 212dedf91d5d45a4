"""Projects over gRPC: owned by their creator, invisible to everyone but the owner and superusers."""

from __future__ import annotations

import grpc
from google.protobuf import field_mask_pb2

from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as ipb
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from agentmesh.runtime.identity import TokenCodec
from tests.integration.registry.support import Api, bearer, rpc_error, strings, violation_fields

GRPC = grpc.StatusCode


async def test_crud(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    created = (
        await stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="Support Desk", description="tickets")),
            metadata=owner.metadata,
        )
    ).project
    assert created.slug == "support-desk"
    assert created.owner_id == owner.user.id
    assert created.created_at.seconds > 0

    by_id = await stub.GetProject(pb.GetProjectRequest(id=created.id), metadata=owner.metadata)
    by_slug = await stub.GetProject(pb.GetProjectRequest(slug="support-desk"), metadata=owner.metadata)
    assert by_id.project == created == by_slug.project

    updated = (
        await stub.UpdateProject(
            pb.UpdateProjectRequest(
                project=res.Project(id=created.id, description="all tickets", name="not in mask"),
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
            ),
            metadata=owner.metadata,
        )
    ).project
    assert (updated.name, updated.slug, updated.description) == (
        "Support Desk",
        "support-desk",
        "all tickets",
    )

    await stub.DeleteProject(pb.DeleteProjectRequest(id=created.id), metadata=owner.metadata)
    gone = await rpc_error(stub.GetProject(pb.GetProjectRequest(id=created.id), metadata=owner.metadata))
    assert (gone.code, gone.reason) == (GRPC.NOT_FOUND, "PROJECT_NOT_FOUND")


async def test_bad_input(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    error = await rpc_error(
        stub.CreateProject(pb.CreateProjectRequest(project=res.Project()), metadata=owner.metadata)
    )
    assert error.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(error) == {"project.name", "project.slug"}
    error = await rpc_error(
        stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="ok", slug="-bad-")), metadata=owner.metadata
        )
    )
    assert violation_fields(error) == {"project.slug"}
    await api.project(owner, slug="taken")
    other = await api.sign_up()
    taken = await rpc_error(
        stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="x", slug="taken")), metadata=other.metadata
        )
    )
    assert (taken.code, taken.reason) == (GRPC.ALREADY_EXISTS, "SLUG_TAKEN")
    listed = await stub.ListProjects(pb.ListProjectsRequest(), metadata=other.metadata)
    assert listed.total_size == 0


async def test_create_with_request_id_is_idempotent_per_owner(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    request = pb.CreateProjectRequest(project=res.Project(name="Once"), request_id="r-1")
    first = await stub.CreateProject(request, metadata=owner.metadata)
    second = await stub.CreateProject(request, metadata=owner.metadata)
    assert first.project == second.project
    other = await api.sign_up()
    # Another user's request id is their own: no collision, no leak of the first project.
    mine = await stub.CreateProject(
        pb.CreateProjectRequest(project=res.Project(name="Mine"), request_id="r-1"), metadata=other.metadata
    )
    assert mine.project.owner_id == other.user.id


async def test_each_user_lists_only_their_projects_and_superusers_all(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    alice, bob = await api.sign_up(), await api.sign_up()
    alices = [await api.project(alice) for _ in range(3)]
    bobs = [await api.project(bob) for _ in range(2)]
    listed = await stub.ListProjects(pb.ListProjectsRequest(), metadata=alice.metadata)
    assert [p.id for p in listed.projects] == [p.id for p in alices]
    assert listed.total_size == 3
    listed = await stub.ListProjects(pb.ListProjectsRequest(page_size=1), metadata=bob.metadata)
    assert [p.id for p in listed.projects] == [bobs[0].id]
    assert listed.total_size == 2
    # Bob's token does not page through Alice's list.
    error = await rpc_error(
        stub.ListProjects(pb.ListProjectsRequest(page_token=listed.next_page_token), metadata=alice.metadata)
    )
    assert error.reason == "INVALID_PAGE_TOKEN"
    root = await api.root()
    everything = await stub.ListProjects(pb.ListProjectsRequest(), metadata=root.metadata)
    assert {p.id for p in everything.projects} == {p.id for p in alices + bobs}


async def test_another_user_probing_a_project_learns_nothing(
    stub: pb_grpc.RegistryServiceStub, api: Api, internal_stub
) -> None:
    alice, mallory = await api.sign_up(), await api.sign_up()
    project = await api.project(alice)
    agent = await api.agent(alice, project, "worker")
    mask = field_mask_pb2.FieldMask
    probes = {
        "GetProject by id": stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=mallory.metadata),
        "GetProject by slug": stub.GetProject(
            pb.GetProjectRequest(slug=project.slug), metadata=mallory.metadata
        ),
        "UpdateProject": stub.UpdateProject(
            pb.UpdateProjectRequest(
                project=res.Project(id=project.id, name="pwned"), update_mask=mask(paths=["name"])
            ),
            metadata=mallory.metadata,
        ),
        "DeleteProject": stub.DeleteProject(
            pb.DeleteProjectRequest(id=project.id), metadata=mallory.metadata
        ),
        "CreateAgent": stub.CreateAgent(
            pb.CreateAgentRequest(
                agent=res.Agent(project_id=project.id, agent_type_id=agent.agent_type_id, name="x")
            ),
            metadata=mallory.metadata,
        ),
        "ListAgents": stub.ListAgents(pb.ListAgentsRequest(project_id=project.id), metadata=mallory.metadata),
        "GetAgent": stub.GetAgent(
            pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=mallory.metadata
        ),
        "UpdateAgent": stub.UpdateAgent(
            pb.UpdateAgentRequest(
                agent=res.Agent(
                    project_id=project.id, id=agent.id, config=res.AgentConfig(instructions="evil")
                ),
                update_mask=mask(paths=["config.instructions"]),
            ),
            metadata=mallory.metadata,
        ),
        "PauseAgent": stub.PauseAgent(
            pb.PauseAgentRequest(project_id=project.id, id=agent.id), metadata=mallory.metadata
        ),
        "ResumeAgent": stub.ResumeAgent(
            pb.ResumeAgentRequest(project_id=project.id, id=agent.id), metadata=mallory.metadata
        ),
        "DeleteAgent": stub.DeleteAgent(
            pb.DeleteAgentRequest(project_id=project.id, id=agent.id), metadata=mallory.metadata
        ),
        "GetAgentMetrics": stub.GetAgentMetrics(
            pb.GetAgentMetricsRequest(project_id=project.id, id=agent.id), metadata=mallory.metadata
        ),
        "ResolveAgent": internal_stub.ResolveAgent(
            ipb.ResolveAgentRequest(project_slug=project.slug, agent_name=agent.name),
            metadata=mallory.metadata,
        ),
        "StartAgentRun": internal_stub.StartAgentRun(
            ipb.StartAgentRunRequest(agent_id=agent.id, run_id="r1"), metadata=mallory.metadata
        ),
        "FinishAgentRun": internal_stub.FinishAgentRun(
            ipb.FinishAgentRunRequest(agent_id=agent.id, run_id="r1", completed=True, tokens_used=99),
            metadata=mallory.metadata,
        ),
    }
    for name, call in probes.items():
        error = await rpc_error(call)
        assert error.code == GRPC.NOT_FOUND, name
        assert error.reason in ("PROJECT_NOT_FOUND", "AGENT_NOT_FOUND"), name

    # The answers are exactly those for things that do not exist.
    nonexistent = await rpc_error(
        stub.GetProject(pb.GetProjectRequest(id="no-such-id"), metadata=mallory.metadata)
    )
    foreign = await rpc_error(stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=mallory.metadata))
    assert (nonexistent.code, nonexistent.reason, nonexistent.message) == (
        foreign.code,
        foreign.reason,
        foreign.message,
    )

    # Nothing changed.
    fetched = await stub.GetAgent(
        pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=alice.metadata
    )
    assert fetched.agent == agent
    assert (
        await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=alice.metadata)
    ).project == project


async def test_superusers_and_the_system_see_every_project(
    stub: pb_grpc.RegistryServiceStub, api: Api, codec: TokenCodec
) -> None:
    alice = await api.sign_up()
    project = await api.project(alice)
    agent = await api.agent(alice, project, "worker")
    root = await api.root()
    system = bearer(codec.system_token())
    for metadata in (root.metadata, system):
        assert (
            await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=metadata)
        ).project == project
        got = await stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=agent.id), metadata=metadata)
        assert got.agent.id == agent.id
    paused = await stub.PauseAgent(
        pb.PauseAgentRequest(project_id=project.id, id=agent.id), metadata=root.metadata
    )
    assert paused.agent.status == res.AGENT_STATUS_PAUSED
    # The system principal owns no projects.
    error = await rpc_error(
        stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name="x")), metadata=system)
    )
    assert (error.code, error.reason) == (GRPC.PERMISSION_DENIED, "USER_REQUIRED")


async def test_deleting_a_project_deletes_its_agents(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    worker = await api.agent(owner, project, "worker")
    await api.agent(owner, project, "boss", config=res.AgentConfig(network_access=strings("worker")))
    await stub.DeleteProject(pb.DeleteProjectRequest(id=project.id), metadata=owner.metadata)
    root = await api.root()
    error = await rpc_error(
        stub.GetAgent(pb.GetAgentRequest(project_id=project.id, id=worker.id), metadata=root.metadata)
    )
    assert error.code == GRPC.NOT_FOUND
    # The slug is free again.
    again = await api.project(owner, slug=project.slug)
    assert again.id != project.id
    listed = await stub.ListAgents(pb.ListAgentsRequest(project_id=again.id), metadata=owner.metadata)
    assert listed.total_size == 0


async def test_update_validates(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    other = await api.project(owner)
    mask = field_mask_pb2.FieldMask

    async def update(project_message: res.Project, *paths: str):
        return await rpc_error(
            stub.UpdateProject(
                pb.UpdateProjectRequest(project=project_message, update_mask=mask(paths=paths)),
                metadata=owner.metadata,
            )
        )

    assert violation_fields(await update(res.Project(id=project.id, name=""), "name")) == {"project.name"}
    assert violation_fields(await update(res.Project(id=project.id), "owner_id")) == {"update_mask"}
    assert violation_fields(await update(res.Project(id=project.id))) == {"update_mask"}
    assert violation_fields(await update(res.Project(name="x"), "name")) == {"project.id"}
    taken = await update(res.Project(id=project.id, slug=other.slug), "slug")
    assert (taken.code, taken.reason) == (GRPC.ALREADY_EXISTS, "SLUG_TAKEN")
    assert (
        await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=owner.metadata)
    ).project == project
