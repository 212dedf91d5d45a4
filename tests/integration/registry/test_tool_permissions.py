"""Tool permissions over gRPC: the maps an agent type (superusers), an agent's config and a project
(its owner) carry, their validation (every bad rule named, nothing stored), and the spec an
executor resolves, which carries the three maps side by side with the effective input expiry."""

from __future__ import annotations

import grpc
from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import types_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2 as res
from tests.integration.registry.support import Api, rpc_error, violation_fields

GRPC = grpc.StatusCode
ALLOW, ASK, DENY = (
    types_pb2.TOOL_PERMISSION_ALLOW,
    types_pb2.TOOL_PERMISSION_ASK,
    types_pb2.TOOL_PERMISSION_DENY,
)


def _mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


async def test_an_agent_type_carries_its_permissions_and_expiry(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    created = await api.agent_type(
        tool_permissions={"get_current_time": ALLOW, "mcp:*": ASK, "delegate:*": DENY},
        input_expiry_seconds=3600,
    )
    assert dict(created.tool_permissions) == {"get_current_time": ALLOW, "mcp:*": ASK, "delegate:*": DENY}
    assert created.input_expiry_seconds == 3600
    read = (await stub.GetAgentType(pb.GetAgentTypeRequest(id=created.id), metadata=root.metadata)).agent_type
    assert read == created

    changed = res.AgentType(id=created.id, tool_permissions={"mcp:files:write_*": DENY})
    updated = (
        await stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(agent_type=changed, update_mask=_mask("tool_permissions")),
            metadata=root.metadata,
        )
    ).agent_type
    assert dict(updated.tool_permissions) == {"mcp:files:write_*": DENY}
    assert updated.input_expiry_seconds == 3600  # not in the mask: unchanged

    cleared = (
        await stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(
                agent_type=res.AgentType(id=created.id),
                update_mask=_mask("tool_permissions", "input_expiry_seconds"),
            ),
            metadata=root.metadata,
        )
    ).agent_type
    assert dict(cleared.tool_permissions) == {} and cleared.input_expiry_seconds == 0


async def test_bad_rules_are_each_named_and_nothing_is_stored(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    bad = res.AgentType(
        name="Strict",
        primary_model="mock",
        tool_permissions={"": ALLOW, "two words": DENY, "bell\a": DENY, "x" * 201: ASK, "unset": 0},
    )
    refused = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=bad), metadata=root.metadata)
    )
    assert refused.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(refused) == {"agent_type.tool_permissions"}
    problems = [v.description for v in refused.violations if v.field == "agent_type.tool_permissions"]
    assert len(problems) == 5
    assert any("key 'two words'" in p and "whitespace" in p for p in problems)
    assert any("key 'unset'" in p and "allow, ask, deny" in p for p in problems)
    assert any("key ''" in p and "1-200 characters" in p for p in problems)
    missing = await rpc_error(
        stub.GetAgentType(pb.GetAgentTypeRequest(slug="strict"), metadata=root.metadata)
    )
    assert missing.code == GRPC.NOT_FOUND

    too_many = res.AgentType(
        name="Many", primary_model="mock", tool_permissions={f"tool_{n}": ALLOW for n in range(201)}
    )
    refused = await rpc_error(
        stub.CreateAgentType(pb.CreateAgentTypeRequest(agent_type=too_many), metadata=root.metadata)
    )
    assert [v.description for v in refused.violations] == ["must have at most 200 rules"]

    for expiry in (1, 2_592_000):
        ok = await api.agent_type(input_expiry_seconds=expiry)
        assert ok.input_expiry_seconds == expiry
    existing = await api.agent_type(tool_permissions={"a": ALLOW})
    refused = await rpc_error(
        stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(
                agent_type=res.AgentType(
                    id=existing.id, tool_permissions={"a": DENY}, input_expiry_seconds=2_592_001
                ),
                update_mask=_mask("tool_permissions", "input_expiry_seconds"),
            ),
            metadata=root.metadata,
        )
    )
    assert violation_fields(refused) == {"agent_type.input_expiry_seconds"}
    kept = (
        await stub.GetAgentType(pb.GetAgentTypeRequest(id=existing.id), metadata=root.metadata)
    ).agent_type
    assert dict(kept.tool_permissions) == {"a": ALLOW}  # nothing stored half-way


async def test_only_superusers_set_an_agent_types_permissions(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    user = await api.sign_up()
    existing = await api.agent_type()
    refused = await rpc_error(
        stub.UpdateAgentType(
            pb.UpdateAgentTypeRequest(
                agent_type=res.AgentType(id=existing.id, tool_permissions={"*": ALLOW}),
                update_mask=_mask("tool_permissions"),
            ),
            metadata=user.metadata,
        )
    )
    assert refused.code == GRPC.PERMISSION_DENIED


async def test_a_projects_owner_sets_its_permissions_and_no_one_else_sees_them(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner, stranger = await api.sign_up(), await api.sign_up()
    project = await api.project(owner, tool_permissions={"delegate:*": ASK})
    assert dict(project.tool_permissions) == {"delegate:*": ASK}

    changed = res.Project(id=project.id, tool_permissions={"mcp:*": DENY, "get_current_time": DENY})
    request = pb.UpdateProjectRequest(project=changed, update_mask=_mask("tool_permissions"))
    updated = (await stub.UpdateProject(request, metadata=owner.metadata)).project
    assert dict(updated.tool_permissions) == {"mcp:*": DENY, "get_current_time": DENY}
    assert updated.name == project.name
    read = (await stub.GetProject(pb.GetProjectRequest(id=project.id), metadata=owner.metadata)).project
    assert read == updated
    root = await api.root()
    by_root = (await stub.UpdateProject(request, metadata=root.metadata)).project
    assert dict(by_root.tool_permissions) == dict(updated.tool_permissions)

    hidden = await rpc_error(stub.UpdateProject(request, metadata=stranger.metadata))
    assert hidden.code == GRPC.NOT_FOUND

    bad = pb.UpdateProjectRequest(
        project=res.Project(id=project.id, tool_permissions={"rm -rf": DENY}),
        update_mask=_mask("tool_permissions"),
    )
    refused = await rpc_error(stub.UpdateProject(bad, metadata=owner.metadata))
    assert refused.code == GRPC.INVALID_ARGUMENT and violation_fields(refused) == {"project.tool_permissions"}
    assert "key 'rm -rf'" in refused.violations[0].description


async def test_an_agents_config_carries_permissions_that_an_empty_map_clears(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner)
    agent = await api.agent(
        owner, project, "careful", config=res.AgentConfig(tool_permissions={"mcp:*": ASK})
    )
    assert dict(agent.config.tool_permissions) == {"mcp:*": ASK}

    def update(config: res.AgentConfig) -> pb.UpdateAgentRequest:
        return pb.UpdateAgentRequest(
            agent=res.Agent(project_id=project.id, id=agent.id, config=config),
            update_mask=_mask("config.tool_permissions"),
        )

    refused = await rpc_error(
        stub.UpdateAgent(
            update(res.AgentConfig(tool_permissions={"ok": DENY, "bad\n": 7})), metadata=owner.metadata
        )
    )
    assert violation_fields(refused) == {"agent.config.tool_permissions"}
    assert len(refused.violations) == 2  # the key, and the value

    updated = await stub.UpdateAgent(
        update(res.AgentConfig(tool_permissions={"x": DENY})), metadata=owner.metadata
    )
    assert dict(updated.agent.config.tool_permissions) == {"x": DENY}
    cleared = await stub.UpdateAgent(update(res.AgentConfig()), metadata=owner.metadata)
    assert dict(cleared.agent.config.tool_permissions) == {}


async def test_the_spec_carries_the_three_maps_and_the_effective_expiry(
    stub: pb_grpc.RegistryServiceStub, api: Api, client: RegistryClient
) -> None:
    owner = await api.sign_up()
    project = await api.project(owner, tool_permissions={"get_current_time": DENY})
    agent_type = await api.agent_type(tool_permissions={"get_current_time": ALLOW, "mcp:*": ALLOW})
    await api.agent(
        owner,
        project,
        "layered",
        agent_type=agent_type,
        config=res.AgentConfig(tool_permissions={"mcp:*": ASK}),
    )
    spec = await client.resolve_agent(project.slug, "layered", metadata=owner.metadata)
    assert dict(spec.tool_permissions) == {"get_current_time": ALLOW, "mcp:*": ALLOW}
    assert dict(spec.agent_tool_permissions) == {"mcp:*": ASK}
    assert dict(spec.project_tool_permissions) == {"get_current_time": DENY}
    assert spec.input_expiry_seconds == 86_400  # the type says 0: a day

    root = await api.root()
    await stub.UpdateAgentType(
        pb.UpdateAgentTypeRequest(
            agent_type=res.AgentType(id=agent_type.id, input_expiry_seconds=600),
            update_mask=_mask("input_expiry_seconds"),
        ),
        metadata=root.metadata,
    )
    await stub.UpdateProject(
        pb.UpdateProjectRequest(project=res.Project(id=project.id), update_mask=_mask("tool_permissions")),
        metadata=owner.metadata,
    )
    changed = await client.resolve_agent(project.slug, "layered", metadata=owner.metadata)
    assert changed.input_expiry_seconds == 600 and dict(changed.project_tool_permissions) == {}
    assert changed.revision != spec.revision  # executors rebuild it
