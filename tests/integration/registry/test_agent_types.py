"""Agent types over gRPC: superuser-managed templates any signed-in user may read."""

from __future__ import annotations

import grpc
from google.protobuf import field_mask_pb2, json_format, struct_pb2

from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Api, rpc_error, violation_fields

GRPC = grpc.StatusCode


def _params(**values: object) -> struct_pb2.Struct:
    params = struct_pb2.Struct()
    params.update(values)
    return params


def _full_type() -> res.AgentType:
    return res.AgentType(
        name="Researcher",
        slug="researcher",
        description="Finds things out",
        expertise=["search", "summaries"],
        personality_prompt="You research carefully.",
        primary_model="openai/gpt-4o-mini",
        fallback_models=["ollama/smollm2:135m"],
        model_params=_params(temperature=0.2, max_tokens=500),
        tools=["web_search", "exit_loop"],
        mcp_servers=[
            res.McpServer(
                name="files", transport="stdio", command="mcp-files", args=["--root", "/tmp"], env={"A": "1"}
            ),
            res.McpServer(name="remote", transport="streamable_http", url="https://mcp.example.com/mcp"),
        ],
        kind=res.AGENT_KIND_LOOP,
        sub_agents=["worker-a", "worker-b"],
        max_steps=7,
        max_iterations=3,
        is_active=True,
        delegation_limits=res.DelegationLimits(max_per_step=2, max_per_chat=30, allow_reentry=True),
    )


async def test_create_get_by_id_and_slug_with_every_field(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    created = (
        await stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=_full_type()), metadata=root.metadata)
    ).agent_type
    assert created.id
    assert created.created_at.seconds > 0 and created.updated_at == created.created_at
    expected = _full_type()
    expected.id = created.id
    expected.created_at.CopyFrom(created.created_at)
    expected.updated_at.CopyFrom(created.updated_at)
    expected.mcp_servers[0].env["A"] = "********"  # env values are secrets: written, never shown
    assert created == expected
    assert json_format.MessageToDict(created.model_params) == {"temperature": 0.2, "max_tokens": 500}

    user = await api.sign_up()  # any signed-in user may read
    by_id = await stub.GetAgentType(pb.GetAgentTypeRequest(id=created.id), metadata=user.metadata)
    by_slug = await stub.GetAgentType(pb.GetAgentTypeRequest(slug="researcher"), metadata=user.metadata)
    assert by_id.agent_type == created == by_slug.agent_type


async def test_defaults_slug_from_name_and_kind_and_steps(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    created = (
        await stub.CreateAgentType(
            pb.CreateAgentTypeRequest(agent_type=res.AgentType(name="My Helper v2!", primary_model="mock")),
            metadata=root.metadata,
        )
    ).agent_type
    assert created.slug == "my-helper-v2"
    assert created.kind == res.AGENT_KIND_LLM
    assert created.max_steps == 10
    # proto3 cannot tell "not set" from false: gRPC callers set is_active explicitly (the REST
    # layer defaults it to true when the JSON body leaves it out).
    assert not created.is_active


async def test_get_unknown_and_bad_lookups(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    user = await api.sign_up()
    for request in (pb.GetAgentTypeRequest(id="nope"), pb.GetAgentTypeRequest(slug="nope")):
        error = await rpc_error(stub.GetAgentType(request, metadata=user.metadata))
        assert (error.code, error.reason) == (GRPC.NOT_FOUND, "AGENT_TYPE_NOT_FOUND")
    for request in (pb.GetAgentTypeRequest(), pb.GetAgentTypeRequest(id="a", slug="b")):
        error = await rpc_error(stub.GetAgentType(request, metadata=user.metadata))
        assert error.code == GRPC.INVALID_ARGUMENT
        assert violation_fields(error) == {"id"}


async def test_create_validates_and_names_fields(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    bad = res.AgentType(
        name="",
        slug="Not_A_Label-",
        primary_model="",
        tools=["a", "a"],
        sub_agents=["no\x00control"],
        max_steps=-1,
        max_iterations=-2,
        mcp_servers=[res.McpServer(name="m", transport="carrier-pigeon")],
    )
    error = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=bad), metadata=root.metadata)
    )
    assert (error.code, error.reason) == (GRPC.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert violation_fields(error) == {
        "agent_type.name",
        "agent_type.slug",
        "agent_type.primary_model",
        "agent_type.tools",
        "agent_type.sub_agents",
        "agent_type.max_steps",
        "agent_type.max_iterations",
        "agent_type.mcp_servers[0].transport",
    }
    unknown_kind = res.AgentType(name="x", primary_model="mock", kind=42)
    error = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=unknown_kind), metadata=root.metadata)
    )
    assert violation_fields(error) == {"agent_type.kind"}
    listed = await stub.ListAgentTypes(pb.ListAgentTypesRequest(), metadata=root.metadata)
    assert listed.total_size == 0  # nothing stored half-way


async def test_slug_is_unique(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    await api.agent_type(slug="taken")
    root = await api.root()
    error = await rpc_error(
        stub.CreateAgentType(
            pb.CreateAgentTypeRequest(
                agent_type=res.AgentType(name="Other", slug="taken", primary_model="mock")
            ),
            metadata=root.metadata,
        )
    )
    assert (error.code, error.reason) == (GRPC.ALREADY_EXISTS, "SLUG_TAKEN")


async def test_create_with_request_id_is_idempotent(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    request = pb.CreateAgentTypeRequest(
        agent_type=res.AgentType(name="Once", primary_model="mock"), request_id="retry-1"
    )
    first = await stub.CreateAgentType(request, metadata=root.metadata)
    second = await stub.CreateAgentType(request, metadata=root.metadata)
    assert first.agent_type == second.agent_type
    assert (await stub.ListAgentTypes(pb.ListAgentTypesRequest(), metadata=root.metadata)).total_size == 1


async def test_update_changes_only_the_masked_fields(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    created = (
        await stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=_full_type()), metadata=root.metadata)
    ).agent_type
    change = res.AgentType(
        id=created.id,
        description="Now shorter",
        is_active=False,
        tools=[],
        model_params=_params(temperature=0.9),
        name="IGNORED: not in the mask",
    )
    updated = (
        await stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(
                agent_type=change,
                update_mask=field_mask_pb2.FieldMask(
                    paths=["description", "is_active", "tools", "model_params"]
                ),
            ),
            metadata=root.metadata,
        )
    ).agent_type
    expected = res.AgentType()
    expected.CopyFrom(created)
    expected.description = "Now shorter"
    expected.is_active = False
    del expected.tools[:]
    expected.model_params.Clear()
    expected.model_params.update({"temperature": 0.9})
    expected.updated_at.CopyFrom(updated.updated_at)
    assert updated == expected
    assert updated.updated_at.ToDatetime() >= created.updated_at.ToDatetime()
    fetched = await stub.GetAgentType(pb.GetAgentTypeRequest(id=created.id), metadata=root.metadata)
    assert fetched.agent_type == updated


async def test_update_rejects_bad_masks_values_and_unknown_ids(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    taken = await api.agent_type(slug="taken")
    target = await api.agent_type()

    async def update(agent_type: res.AgentType, *paths: str):
        return await rpc_error(
            stub.UpdateAgentType(
                pb.UpdateAgentTypeRequest(
                    agent_type=agent_type, update_mask=field_mask_pb2.FieldMask(paths=paths)
                ),
                metadata=root.metadata,
            )
        )

    no_mask = await update(res.AgentType(id=target.id, name="x"))
    assert violation_fields(no_mask) == {"update_mask"}
    read_only = await update(res.AgentType(id=target.id), "created_at")
    assert violation_fields(read_only) == {"update_mask"}
    bad_value = await update(res.AgentType(id=target.id, slug="Bad Slug"), "slug")
    assert violation_fields(bad_value) == {"agent_type.slug"}
    no_id = await update(res.AgentType(name="x"), "name")
    assert violation_fields(no_id) == {"agent_type.id"}
    duplicate = await update(res.AgentType(id=target.id, slug=taken.slug), "slug")
    assert (duplicate.code, duplicate.reason) == (GRPC.ALREADY_EXISTS, "SLUG_TAKEN")
    unknown = await update(res.AgentType(id="missing", name="x"), "name")
    assert (unknown.code, unknown.reason) == (GRPC.NOT_FOUND, "AGENT_TYPE_NOT_FOUND")
    unchanged = await stub.GetAgentType(pb.GetAgentTypeRequest(id=target.id), metadata=root.metadata)
    assert unchanged.agent_type == target


async def test_delete_and_delete_while_in_use(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    unused = await api.agent_type()
    await stub.DeleteAgentType(pb.DeleteAgentTypeRequest(id=unused.id), metadata=root.metadata)
    gone = await rpc_error(stub.GetAgentType(pb.GetAgentTypeRequest(id=unused.id), metadata=root.metadata))
    assert gone.code == GRPC.NOT_FOUND
    again = await rpc_error(
        stub.DeleteAgentType(pb.DeleteAgentTypeRequest(id=unused.id), metadata=root.metadata)
    )
    assert (again.code, again.reason) == (GRPC.NOT_FOUND, "AGENT_TYPE_NOT_FOUND")

    owner = await api.sign_up()
    used = await api.agent_type()
    project = await api.project(owner)
    await api.agent(owner, project, "worker", agent_type=used)
    in_use = await rpc_error(
        stub.DeleteAgentType(pb.DeleteAgentTypeRequest(id=used.id), metadata=root.metadata)
    )
    assert (in_use.code, in_use.reason) == (GRPC.FAILED_PRECONDITION, "AGENT_TYPE_IN_USE")
    # Once the project (and its agents) is gone, the type can go.
    await stub.DeleteProject(pb.DeleteProjectRequest(id=project.id), metadata=owner.metadata)
    await stub.DeleteAgentType(pb.DeleteAgentTypeRequest(id=used.id), metadata=root.metadata)


async def test_regular_users_cannot_write_types(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    user = await api.sign_up()
    existing = await api.agent_type()
    calls = [
        stub.CreateAgentType(
            pb.CreateAgentTypeRequest(agent_type=res.AgentType(name="x", primary_model="mock")),
            metadata=user.metadata,
        ),
        stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(
                agent_type=res.AgentType(id=existing.id, name="hijacked"),
                update_mask=field_mask_pb2.FieldMask(paths=["name"]),
            ),
            metadata=user.metadata,
        ),
        stub.DeleteAgentType(pb.DeleteAgentTypeRequest(id=existing.id), metadata=user.metadata),
    ]
    for call in calls:
        error = await rpc_error(call)
        assert (error.code, error.reason) == (GRPC.PERMISSION_DENIED, "SUPERUSER_REQUIRED")
    root = await api.root()
    unchanged = await stub.GetAgentType(pb.GetAgentTypeRequest(id=existing.id), metadata=root.metadata)
    assert unchanged.agent_type == existing
    assert (await stub.ListAgentTypes(pb.ListAgentTypesRequest(), metadata=user.metadata)).total_size == 1


async def test_list_pages_with_tokens_and_page_numbers(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    created = [await api.agent_type(name=f"Type {i}", slug=f"type-{i}") for i in range(7)]
    user = await api.sign_up()
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = await stub.ListAgentTypes(
            pb.ListAgentTypesRequest(page_size=3, page_token=token), metadata=user.metadata
        )
        assert page.total_size == 7
        seen += [t.slug for t in page.agent_types]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 3
    assert seen == [t.slug for t in created]  # creation order, none twice, none missed

    third = await stub.ListAgentTypes(pb.ListAgentTypesRequest(page_size=3, page=3), metadata=user.metadata)
    assert [t.slug for t in third.agent_types] == ["type-6"]
    assert third.next_page_token == ""
    second = await stub.ListAgentTypes(pb.ListAgentTypesRequest(page_size=3, page=2), metadata=user.metadata)
    assert [t.slug for t in second.agent_types] == ["type-3", "type-4", "type-5"]
    # A page-numbered page also gives a token to go on with.
    after = await stub.ListAgentTypes(
        pb.ListAgentTypesRequest(page_size=3, page_token=second.next_page_token), metadata=user.metadata
    )
    assert [t.slug for t in after.agent_types] == ["type-6"]
    beyond = await stub.ListAgentTypes(pb.ListAgentTypesRequest(page_size=3, page=9), metadata=user.metadata)
    assert (list(beyond.agent_types), beyond.total_size) == ([], 7)
    everything = await stub.ListAgentTypes(pb.ListAgentTypesRequest(), metadata=user.metadata)
    assert len(everything.agent_types) == 7 and everything.next_page_token == ""


async def test_list_rejects_bad_tokens_and_sizes(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    for i in range(3):
        await api.agent_type(slug=f"t-{i}")
    user = await api.sign_up()
    good = (
        await stub.ListAgentTypes(pb.ListAgentTypesRequest(page_size=1), metadata=user.metadata)
    ).next_page_token
    payload, signature = good.split(".")
    tampered = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1] + "." + signature
    for token in ("garbage", "", "a.b", tampered, "eyJ2IjoxfQ.AAAA", good + "x", "ü.ü"):
        if not token:
            continue
        error = await rpc_error(
            stub.ListAgentTypes(pb.ListAgentTypesRequest(page_token=token), metadata=user.metadata)
        )
        assert (error.code, error.reason) == (GRPC.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN"), token
        assert violation_fields(error) == {"page_token"}
    for request, field in (
        (pb.ListAgentTypesRequest(page_size=-1), "page_size"),
        (pb.ListAgentTypesRequest(page=-1), "page"),
        (pb.ListAgentTypesRequest(page=2, page_token=good), "page"),
    ):
        error = await rpc_error(stub.ListAgentTypes(request, metadata=user.metadata))
        assert error.code == GRPC.INVALID_ARGUMENT
        assert violation_fields(error) == {field}
    # A token of one list is refused by another.
    project_list = await rpc_error(
        stub.ListProjects(pb.ListProjectsRequest(page_token=good), metadata=user.metadata)
    )
    assert project_list.reason == "INVALID_PAGE_TOKEN"


async def test_mcp_servers_are_validated(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    root = await api.root()
    bad = res.AgentType(
        name="x",
        primary_model="mock",
        mcp_servers=[
            res.McpServer(name="a", transport="stdio"),
            res.McpServer(name="a", transport="streamable_http", url="ftp://nope"),
        ],
    )
    error = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=bad), metadata=root.metadata)
    )
    assert violation_fields(error) == {
        "agent_type.mcp_servers",
        "agent_type.mcp_servers[0].command",
        "agent_type.mcp_servers[1].url",
    }
