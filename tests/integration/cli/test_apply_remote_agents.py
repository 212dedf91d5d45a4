"""`agentmesh apply` with remote A2A agents (kind RemoteAgent, a project's `remote_agents`): created
before the project's agents so that network_access may name them, unchanged on a second run
although the credential cannot be read back, updated field by field, and checked before any
write. On both databases."""

from __future__ import annotations

import textwrap
import uuid

import pytest

from agentmesh.cli.apply.document import ApplyError, load_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.internal.registry.v1 import registry_internal_service_pb2_grpc as internal_grpc
from agentmesh.registry.client import RegistryClient
from tests.bearer import authorized_channel

SECRET = "remote-credential-0123456789"


def mesh_yaml(slug: str, *, description: str = "translates", credential: str = SECRET) -> str:
    return textwrap.dedent(
        f"""\
        agent_types:
          - name: Remote Coordinator
            slug: remote-coordinator
            primary_model: mock
        projects:
          - name: Remote {slug}
            slug: {slug}
            remote_agents:
              - name: translator
                card_url: https://translator.example.invalid/.well-known/agent-card.json
                credential: {credential}
                description: {description}
            agents:
              - name: coordinator
                type: remote-coordinator
                config:
                  network_access: [translator]
        """
    )


async def apply_text(text: str, caller: Connection) -> list[Change]:
    return await apply_manifest(load_manifest(text), RegistryClient(caller.channel), metadata=caller.metadata)


async def stored_credential(registry_address: str, project_id: str) -> str:
    async with authorized_channel(registry_address) as channel:
        found = await internal_grpc.RegistryInternalServiceStub(channel).ResolveRemoteAgent(
            internal_pb.ResolveRemoteAgentRequest(project_id=project_id, name="translator")
        )
    return found.remote_agent.credential


async def test_remote_agents_are_applied_before_the_agents_naming_them(
    admin: Connection, registry_address: str
) -> None:
    slug = f"remote-{uuid.uuid4().hex[:8]}"
    changes = await apply_text(mesh_yaml(slug), admin)
    assert [(c.kind, c.ref, c.action) for c in changes][1:] == [
        ("project", slug, Action.CREATE),
        ("remote agent", f"{slug}/translator", Action.CREATE),
        ("agent", f"{slug}/coordinator", Action.CREATE),
    ]
    registry = RegistryClient(admin.channel)
    project = await registry.get_project(slug=slug, metadata=admin.metadata)
    assert await stored_credential(registry_address, project.id) == SECRET

    # Again: nothing changes, although the registry shows the credential masked.
    again = await apply_text(mesh_yaml(slug, credential="another-value"), admin)
    assert {c.action for c in again} == {Action.UNCHANGED}

    updated = await apply_text(mesh_yaml(slug, description="translates well"), admin)
    assert ("remote agent", f"{slug}/translator", Action.UPDATE, ("description",)) in [
        (c.kind, c.ref, c.action, c.fields) for c in updated
    ]
    assert await stored_credential(registry_address, project.id) == SECRET  # kept

    without = mesh_yaml(slug, credential='""', description="translates well")
    cleared = await apply_text(without, admin)
    assert ("remote agent", Action.UPDATE, ("credential",)) in [(c.kind, c.action, c.fields) for c in cleared]
    assert await stored_credential(registry_address, project.id) == ""


async def test_bad_remote_agents_are_reported_before_any_write(admin: Connection) -> None:
    slug = f"remote-{uuid.uuid4().hex[:8]}"
    clash = (
        mesh_yaml(slug)
        .replace("- name: coordinator", "- name: translator")
        .replace("network_access: [translator]", "network_access: []")
    )
    with pytest.raises(ApplyError) as raised:
        load_manifest(clash)
    assert [p.field for p in raised.value.problems] == ["projects[0].remote_agents[0].name"]

    bad_url = mesh_yaml(slug).replace("https://translator.example.invalid", "ftp://nowhere")
    with pytest.raises(ApplyError) as raised:
        await apply_text(bad_url, admin)
    assert [p.field for p in raised.value.problems] == ["projects[0].remote_agents[0].card_url"]
    assert not raised.value.applied
    registry = RegistryClient(admin.channel)
    projects = (await registry.list_projects(page_size=1000, metadata=admin.metadata)).projects
    assert slug not in {p.slug for p in projects}
