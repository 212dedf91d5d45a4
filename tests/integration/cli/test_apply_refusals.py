"""`agentmesh apply` refusing: bad files refused with the path of the problem before anything is
written, what the registry refuses leaves nothing half-applied, and a failed write names its
entry and what was applied before it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentmesh.cli.apply.document import ApplyError, load_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection, Credentials, connect
from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.apply_support import AGENT, MESH_YAML, apply_text, cli_env
from tests.integration.cli.support import RecordingRegistry, invoke, snapshot


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        pytest.param(
            ("network_access: [coordinator]", "network_acess: [coordinator]"),
            f"{AGENT}.config.network_acess",
            "unknown field",
            id="unknown-field",
        ),
        pytest.param(
            ("max_steps: 5", 'max_steps: "5"'),
            "agent_types[0].max_steps",
            "valid integer",
            id="wrong-type",
        ),
        pytest.param(
            ("- name: worker\n        type: worker", '- name: "Worker\\t1"\n        type: worker'),
            f"{AGENT}.name",
            "must not contain control characters",
            id="bad-agent-name",
        ),
        pytest.param(
            (
                "- name: worker\n        type: worker",
                "- name: worker\n        slug: Worker_1\n        type: worker",
            ),
            f"{AGENT}.slug",
            "DNS label",
            id="bad-agent-slug",
        ),
        pytest.param(
            ("- name: pipeline\n        type: pipeline", "- name: worker\n        type: pipeline"),
            "projects[0].agents[2].name",
            "declared twice (first at projects[0].agents[1])",
            id="duplicate-agent",
        ),
        pytest.param(
            ("kind: sequential", "kind: workflow"),
            "agent_types[2].kind",
            "'llm', 'loop', 'sequential' or 'parallel'",
            id="bad-kind",
        ),
        pytest.param(
            ("  - name: Demo\n    slug: demo\n", "  - slug: demo\n"),
            "projects[0].name",
            "is required",
            id="missing-name",
        ),
        pytest.param(
            ("version: 1", "version: 2"),
            "version",
            "Input should be 1",
            id="unknown-version",
        ),
        pytest.param(
            ("description: Does one task", "description: Does one task\n    description: twice"),
            "",
            "found duplicate key",
            id="duplicate-key",
        ),
        pytest.param(
            ("expertise: [planning, delegation]", "expertise: [planning, delegation"),
            "",
            "not valid YAML: line",
            id="not-yaml",
        ),
    ],
)
async def test_invalid_file_is_refused_before_the_registry_is_asked(
    edit: tuple[str, str], path: str, message: str
) -> None:
    old, new = edit
    assert old in MESH_YAML
    with pytest.raises(ApplyError) as raised:
        load_manifest(MESH_YAML.replace(old, new, 1))

    problems = {(problem.field, problem.description) for problem in raised.value.problems}
    assert any(field == path and message in text for field, text in problems), problems


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        pytest.param(
            ("network_access: [coordinator]", "network_access: [coordinator, reviewer]"),
            f"{AGENT}.config.network_access",
            "no agent named 'reviewer' in this project",
            id="unknown-reference",
        ),
        pytest.param(
            ("type: worker", "type: reviewer"),
            f"{AGENT}.type",
            "no agent type 'reviewer' in this file or the registry",
            id="unknown-type",
        ),
        pytest.param(
            ("primary_model: mock\n  - name: Pipeline", "primary_model: ''\n  - name: Pipeline"),
            "agent_types[1].primary_model",
            "is required for kind llm",
            id="registry-rule",
        ),
        pytest.param(
            ("slug: coordinator", "slug: Coordinator!"),
            "agent_types[0].slug",
            "must be a DNS label",
            id="bad-slug",
        ),
        pytest.param(
            ("max_steps: 4", "max_steps: 0"),
            "projects[0].agents[0].config.max_steps",
            "must be between 1 and 1000",
            id="config-range",
        ),
        pytest.param(
            (
                "primary_model: mock\n  - name: Pipeline",
                "primary_model: mock\n    is_active: false\n  - name: Pipeline",
            ),
            f"{AGENT}.type",
            "agent type 'worker' is inactive",
            id="inactive-type",
        ),
    ],
)
async def test_file_that_does_not_fit_the_registry_writes_nothing(
    recording: RecordingRegistry, admin: Connection, edit: tuple[str, str], path: str, message: str
) -> None:
    old, new = edit
    assert old in MESH_YAML
    with pytest.raises(ApplyError) as raised:
        await apply_text(MESH_YAML.replace(old, new, 1), recording, admin)

    problems = {(problem.field, problem.description) for problem in raised.value.problems}
    assert any(field == path and message in text for field, text in problems), problems
    assert raised.value.applied == []
    assert recording.writes == []
    assert await snapshot(recording, admin.metadata) == {"agent_types": {}, "projects": {}}


async def test_an_agents_type_cannot_change(recording: RecordingRegistry, admin: Connection) -> None:
    await apply_text(MESH_YAML, recording, admin)
    before = await snapshot(recording, admin.metadata)
    recording.writes.clear()
    changed = MESH_YAML.replace("type: worker", "type: coordinator").replace(
        "description: Splits work", "description: Splits all work"
    )

    with pytest.raises(ApplyError) as raised:
        await apply_text(changed, recording, admin)

    assert [(p.field, p.description) for p in raised.value.problems] == [
        (
            f"{AGENT}.type",
            "agent 'demo/worker' was spawned from type 'worker'; an agent's type cannot change "
            "(give the new agent another name)",
        )
    ]
    assert recording.writes == []  # not even the valid change to the coordinator type
    assert await snapshot(recording, admin.metadata) == before


async def test_agent_types_need_a_superuser(mesh: Mesh, admin: Connection, registry_address: str) -> None:
    await admin.registry.register_user("member@example.com", "member-password-1")
    async with connect(registry_address, Credentials("member@example.com", "member-password-1")) as member:
        registry = RecordingRegistry(member.channel)
        with pytest.raises(ApplyError) as raised:
            await apply_text(MESH_YAML, registry, member)
        assert [(p.field, p.description) for p in raised.value.problems] == [
            (
                "agent_types[0]",
                "agent types are managed by superusers; signed in as member@example.com, who is not one",
            )
        ]
        assert registry.writes == []

        # Types made by a superuser, a member may declare projects and agents of them.
        types_only = MESH_YAML.partition("projects:\n")[0]
        await apply_text(types_only, RecordingRegistry(admin.channel), admin)
        changes = await apply_text(MESH_YAML, registry, member)
        assert [c.action for c in changes] == [Action.UNCHANGED] * 3 + [Action.CREATE] * 4
        project = await member.registry.get_project(slug="demo", metadata=member.metadata)
        me = await member.registry.get_current_user(metadata=member.metadata)
        assert project.owner_id == me.id


async def test_a_failed_write_names_the_entry_and_what_was_applied(
    admin: Connection, registry_address: str, tmp_path: Path
) -> None:
    """A project slug taken by someone else's project is invisible to the member, so only the
    write can find out; what was applied before is reported."""
    await admin.registry.create_project(
        resources_pb2.Project(name="Demo", slug="demo"), metadata=admin.metadata
    )
    await admin.registry.register_user("member@example.com", "member-password-1")
    declared = textwrap.dedent(
        """\
        projects:
          - name: Mine
          - name: Demo
            slug: demo
        """
    )
    async with connect(registry_address, Credentials("member@example.com", "member-password-1")) as member:
        with pytest.raises(ApplyError) as raised:
            await apply_text(declared, RecordingRegistry(member.channel), member)

    problem = raised.value.problems[0]
    assert problem.field == "projects[1]"
    assert problem.description == "project slug 'demo' is taken"
    assert raised.value.applied == [Change("project", "mine", Action.CREATE)]

    file = tmp_path / "projects.yaml"
    file.write_text(declared.replace("Mine", "Ours"))
    env = {**cli_env(), "AGENTMESH_EMAIL": "member@example.com", "AGENTMESH_PASSWORD": "member-password-1"}
    result = await invoke(app, ["apply", "-f", str(file), "--gateway", registry_address], env=env)
    assert result.exit_code == 1
    assert "ours" in result.stdout and "created" in result.stdout
    assert "applying stopped; the objects above were applied" in result.stderr
    assert "projects[1]: project slug 'demo' is taken" in result.stderr


# --- The command -------------------------------------------------------------------------------------
