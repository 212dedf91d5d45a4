"""`agentmesh apply` with registered MCP servers (kind McpServer, the `mcp_servers` list): created,
updated field by field, unchanged on a second run although their secrets cannot be read back, and
named by agent types."""

from __future__ import annotations

import textwrap

import pytest

from agentmesh.cli.apply.document import ApplyError, load_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection, Credentials, connect
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.identity import TokenCodec
from tests.bearer import service_channel
from tests.integration.cli.support import RecordingRegistry
from tests.mesh import JWT_SECRET, bearer

SECRET = "kb-secret-0123456789abcdef"

MESH_YAML = textwrap.dedent(
    f"""\
    agent_types:
      - name: Product Owner
        slug: po
        primary_model: mock
        mcp_servers:
          - knowledge-base            # a registered server, by name
          - name: files               # one inline
            transport: stdio
            command: files-mcp
            env: {{ROOT: /data, TOKEN: {SECRET}}}
    projects:
      - name: Docs
        slug: docs
        agents:
          - name: owner
            type: po
    mcp_servers:
      - name: knowledge-base
        transport: streamable_http
        url: http://kb:8000/mcp
        headers: {{Authorization: "Bearer ${{env:KB_TOKEN}}"}}
      - name: knowledge-base          # the project's own, hiding the global one for its agents
        project: docs
        transport: stdio
        command: kb-mcp
        env: {{KB_TOKEN: {SECRET}}}
    """
)


async def apply_text(text: str, registry: RecordingRegistry, caller: Connection) -> list[Change]:
    return await apply_manifest(load_manifest(text), registry, metadata=caller.metadata)


async def test_servers_are_created_then_left_alone_then_updated_by_field(
    recording: RecordingRegistry, admin: Connection, registry_address: str
) -> None:
    changes = await apply_text(MESH_YAML, recording, admin)
    assert [(c.kind, c.ref, c.action) for c in changes] == [
        ("agent type", "po", Action.CREATE),
        ("project", "docs", Action.CREATE),
        ("MCP server", "knowledge-base", Action.CREATE),
        ("MCP server", "docs/knowledge-base", Action.CREATE),
        ("agent", "docs/owner", Action.CREATE),
    ]
    listed = await recording.list_mcp_servers(page_size=100, metadata=admin.metadata)
    assert sorted((s.project_id != "", s.transport) for s in listed.mcp_servers) == [
        (False, "streamable_http"),
        (True, "stdio"),
    ]
    assert SECRET not in str(listed)

    # The secrets cannot be read back, yet a second run sees nothing to do.
    recording.writes.clear()
    again = await apply_text(MESH_YAML, recording, admin)
    assert {c.action for c in again} == {Action.UNCHANGED}, again
    assert recording.writes == []

    # A changed field is written alone; the secrets it does not touch stay.
    changed = MESH_YAML.replace("url: http://kb:8000/mcp", "url: http://kb:9000/mcp").replace(
        f"env: {{KB_TOKEN: {SECRET}}}", f"env: {{KB_TOKEN: {SECRET}, MORE: x}}"
    )
    changes = await apply_text(changed, recording, admin)
    assert [(c.ref, c.action, c.fields) for c in changes if c.kind == "MCP server"] == [
        ("knowledge-base", Action.UPDATE, ("url",)),
        ("docs/knowledge-base", Action.UPDATE, ("env",)),
    ]
    assert recording.writes == [("update_mcp_server", ("url",)), ("update_mcp_server", ("env",))]

    # What an executor gets (the system principal alone may ask) holds the secrets as written.
    system = bearer(TokenCodec(JWT_SECRET).system_token())
    project = await recording.get_project(slug="docs", metadata=admin.metadata)
    agents = await recording.list_agents(project.id, metadata=admin.metadata)
    async with service_channel(registry_address) as channel:
        resolved = await RegistryClient(channel).resolve_mcp_servers(agents.agents[0].id, metadata=system)
    assert [(s.name, dict(s.env)) for s in resolved.servers] == [
        ("knowledge-base", {"KB_TOKEN": SECRET, "MORE": "x"}),
        ("files", {"ROOT": "/data", "TOKEN": SECRET}),
    ]


async def test_servers_need_a_superuser_and_a_known_project(admin: Connection, registry_address: str) -> None:
    servers_only = "mcp_servers:" + MESH_YAML.partition("mcp_servers:\n    ")[2].partition("mcp_servers:")[2]
    await admin.registry.register_user("member@example.com", "member-password-1")
    async with connect(registry_address, Credentials("member@example.com", "member-password-1")) as member:
        with pytest.raises(ApplyError) as raised:
            await apply_text(servers_only, RecordingRegistry(member.channel), member)
    assert [p.field for p in raised.value.problems] == ["mcp_servers[0]"]
    assert "superusers" in raised.value.problems[0].description

    with pytest.raises(ApplyError) as raised:
        await apply_text(servers_only, RecordingRegistry(admin.channel), admin)
    assert [p.field for p in raised.value.problems] == ["mcp_servers[1].project"]

    bad = (
        "mcp_servers:\n  - {name: Not A Label, transport: stdio, command: x}\n"
        "  - {name: y, transport: pigeon}\n"
    )
    with pytest.raises(ApplyError) as raised:
        load_manifest(bad)
    assert [p.field for p in raised.value.problems] == ["mcp_servers[1].transport"]
    with pytest.raises(ApplyError) as raised:
        load_manifest(bad.replace("transport: pigeon", "transport: stdio, command: y"))
    assert [p.field for p in raised.value.problems] == ["mcp_servers[0].name"]
