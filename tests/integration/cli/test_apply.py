"""`agentmesh apply`: declared agent types, projects and agents made so in a real mesh — created,
updated field by field, left alone when unchanged — and bad files refused with the path of the
problem before anything is written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentmesh.cli.apply.document import ApplyError, load_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection, Credentials, connect
from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import RecordingRegistry, invoke, run_agentmesh, snapshot
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD

MESH_YAML = textwrap.dedent(
    """\
    version: 1
    agent_types:
      - name: Coordinator
        slug: coordinator
        description: Splits work and hands it to workers
        expertise: [planning, delegation]
        personality_prompt: |
          You coordinate. Delegate each task to the worker.
        primary_model: mock
        fallback_models: [mock]
        model_params: {temperature: 0.2, max_tokens: 500}
        tools: [exit_loop]
        mcp_servers:
          - name: files
            transport: stdio
            command: python
            args: [-m, files_server]
            env: {ROOT: /data}
        kind: llm
        max_steps: 5
        is_active: true
      - name: Worker
        description: Does one task
        primary_model: mock
      - name: Pipeline
        slug: pipeline
        kind: sequential
        sub_agents: [worker]
        max_iterations: 3
    projects:
      - name: Demo
        slug: demo
        description: A coordinator and a worker
        agents:
          - name: coordinator
            type: coordinator
            config:
              max_steps: 4
              network_access: [worker]
              mock_responses:
                - content: ""
                  tool_calls: [{name: delegate, arguments: {agent: worker, task: Process task 42}}]
                - All done.
          - name: worker
            type: worker
            config:
              instructions: You process tasks.
              model_params: {temperature: 0}
              network_access: [coordinator]
              mock_responses: [Task 42 processed.]
          - name: pipeline
            type: pipeline
            config:
              sub_agents: [worker]
              max_iterations: 2
              double_texting: reject
    """
)

ALL_CREATED = [
    Change("agent type", "coordinator", Action.CREATE),
    Change("agent type", "worker", Action.CREATE),
    Change("agent type", "pipeline", Action.CREATE),
    Change("project", "demo", Action.CREATE),
    Change("agent", "demo/coordinator", Action.CREATE),
    Change("agent", "demo/worker", Action.CREATE),
    Change("agent", "demo/pipeline", Action.CREATE),
]


async def apply_text(
    text: str, registry: RecordingRegistry, caller: Connection, *, dry_run: bool = False
) -> list[Change]:
    return await apply_manifest(load_manifest(text), registry, metadata=caller.metadata, dry_run=dry_run)


def actions(changes: list[Change]) -> dict[str, tuple[Action, tuple[str, ...]]]:
    return {change.ref: (change.action, change.fields) for change in changes}


async def test_apply_creates_every_declared_object(recording: RecordingRegistry, admin: Connection) -> None:
    changes = await apply_text(MESH_YAML, recording, admin)

    assert changes == ALL_CREATED
    state = await snapshot(recording, admin.metadata)
    coordinator = state["agent_types"]["coordinator"]
    assert coordinator["name"] == "Coordinator"
    assert coordinator["expertise"] == ["planning", "delegation"]
    assert coordinator["personalityPrompt"] == "You coordinate. Delegate each task to the worker.\n"
    assert coordinator["fallbackModels"] == ["mock"]
    assert coordinator["modelParams"] == {"temperature": 0.2, "max_tokens": 500.0}
    assert coordinator["tools"] == ["exit_loop"]
    assert coordinator["mcpServers"] == [
        {
            "name": "files",
            "transport": "stdio",
            "command": "python",
            "args": ["-m", "files_server"],
            "env": {"ROOT": "********"},
        }
    ]  # fmt: skip  (env values are write-only: the registry shows them masked)
    assert coordinator["kind"] == "AGENT_KIND_LLM"
    assert coordinator["maxSteps"] == 5
    assert coordinator["isActive"] is True
    assert state["agent_types"]["worker"]["name"] == "Worker"  # slug made from the name
    pipeline = state["agent_types"]["pipeline"]
    assert (pipeline["kind"], pipeline["subAgents"], pipeline["maxIterations"]) == (
        "AGENT_KIND_SEQUENTIAL",
        ["worker"],
        3,
    )

    project = state["projects"]["demo"]
    assert (project["name"], project["description"]) == ("Demo", "A coordinator and a worker")
    agents = project["agents"]
    assert set(agents) == {"coordinator", "worker", "pipeline"}
    assert agents["coordinator"]["agentTypeId"] == coordinator["id"]
    assert agents["coordinator"]["config"] == {
        "maxSteps": 4,
        "networkAccess": {"values": ["worker"]},
        "mockResponses": [
            {
                "content": "",
                "tool_calls": [
                    {"name": "delegate", "arguments": {"agent": "worker", "task": "Process task 42"}}
                ],
            },
            "All done.",
        ],
    }
    assert agents["worker"]["config"] == {
        "instructions": "You process tasks.",
        "modelParams": {"temperature": 0.0},
        "networkAccess": {"values": ["coordinator"]},
        "mockResponses": ["Task 42 processed."],
    }
    assert agents["pipeline"]["config"] == {
        "subAgents": {"values": ["worker"]},
        "maxIterations": 2,
        "doubleTexting": "reject",
    }
    assert all(agent["status"] == "AGENT_STATUS_IDLE" for agent in agents.values())

    # The coordinator and the worker name each other: one was created first without the reference,
    # then given it once both existed.
    assert [name for name, _ in recording.writes].count("create_agent") == 3
    assert ("update_agent", ("config.network_access",)) in recording.writes


async def test_applying_the_same_file_twice_changes_nothing(
    recording: RecordingRegistry, admin: Connection
) -> None:
    await apply_text(MESH_YAML, recording, admin)
    before = await snapshot(recording, admin.metadata)
    recording.writes.clear()

    changes = await apply_text(MESH_YAML, recording, admin)

    assert changes == [Change(c.kind, c.ref, Action.UNCHANGED) for c in ALL_CREATED]
    assert recording.writes == []
    assert await snapshot(recording, admin.metadata) == before  # updated_at included


async def test_changing_one_field_updates_only_that_field(
    recording: RecordingRegistry, admin: Connection
) -> None:
    await apply_text(MESH_YAML, recording, admin)
    before = await snapshot(recording, admin.metadata)
    recording.writes.clear()
    changed = MESH_YAML.replace("description: Does one task", "description: Does one task well").replace(
        "instructions: You process tasks.", "instructions: You process tasks carefully."
    )

    changes = await apply_text(changed, recording, admin)

    assert actions(changes) == {
        "coordinator": (Action.UNCHANGED, ()),
        "worker": (Action.UPDATE, ("description",)),
        "pipeline": (Action.UNCHANGED, ()),
        "demo": (Action.UNCHANGED, ()),
        "demo/coordinator": (Action.UNCHANGED, ()),
        "demo/worker": (Action.UPDATE, ("config.instructions",)),
        "demo/pipeline": (Action.UNCHANGED, ()),
    }
    assert recording.writes == [
        ("update_agent_type", ("description",)),
        ("update_agent", ("config.instructions",)),
    ]
    after = await snapshot(recording, admin.metadata)
    worker_type = after["agent_types"]["worker"]
    assert worker_type["description"] == "Does one task well"
    assert worker_type["updatedAt"] != before["agent_types"]["worker"]["updatedAt"]
    assert after["agent_types"]["coordinator"] == before["agent_types"]["coordinator"]
    worker = after["projects"]["demo"]["agents"]["worker"]
    assert worker["config"] == {
        **before["projects"]["demo"]["agents"]["worker"]["config"],
        "instructions": "You process tasks carefully.",
    }


async def test_fields_left_out_are_kept_and_null_clears_an_override(
    recording: RecordingRegistry, admin: Connection
) -> None:
    await apply_text(MESH_YAML, recording, admin)
    recording.writes.clear()
    partial = textwrap.dedent(
        """\
        agent_types:
          - name: Coordinator
            slug: coordinator
        projects:
          - name: Demo
            slug: demo
            agents:
              - name: worker
                type: worker
                config:
                  instructions: null
        """
    )

    changes = await apply_text(partial, recording, admin)

    assert actions(changes) == {
        "coordinator": (Action.UNCHANGED, ()),
        "demo": (Action.UNCHANGED, ()),
        "demo/worker": (Action.UPDATE, ("config.instructions",)),
    }
    state = await snapshot(recording, admin.metadata)
    assert state["agent_types"]["coordinator"]["description"] == "Splits work and hands it to workers"
    assert state["projects"]["demo"]["description"] == "A coordinator and a worker"
    worker = state["projects"]["demo"]["agents"]["worker"]["config"]
    assert "instructions" not in worker  # the type's prompt applies again
    assert worker["networkAccess"] == {"values": ["coordinator"]}


async def test_dry_run_reports_and_writes_nothing(recording: RecordingRegistry, admin: Connection) -> None:
    changes = await apply_text(MESH_YAML, recording, admin, dry_run=True)

    assert changes == ALL_CREATED
    assert recording.writes == []
    state = await snapshot(recording, admin.metadata)
    assert state == {"agent_types": {}, "projects": {}}


async def test_several_documents_apply_as_one(recording: RecordingRegistry, admin: Connection) -> None:
    types, _, projects = MESH_YAML.partition("projects:\n")
    text = f"{types}---\n# the projects\nprojects:\n{projects}"

    assert await apply_text(text, recording, admin) == ALL_CREATED
    assert [c.action for c in await apply_text(text, recording, admin)] == [Action.UNCHANGED] * 7


async def test_agents_may_have_names_as_people_write_them(
    recording: RecordingRegistry, admin: Connection
) -> None:
    types, _, _ = MESH_YAML.partition("projects:\n")
    text = types + textwrap.dedent(
        """\
        projects:
          - name: Named
            agents:
              - name: My PO Agent
                type: coordinator
                config: {network_access: [Report Writer]}
              - name: Report Writer
                slug: writer
                type: worker
                config: {network_access: [my-po-agent]}
        """
    )
    assert actions(await apply_text(text, recording, admin))["named/my-po-agent"] == (Action.CREATE, ())
    state = await snapshot(recording, admin.metadata)
    agents = state["projects"]["named"]["agents"]
    assert (agents["My PO Agent"]["slug"], agents["Report Writer"]["slug"]) == ("my-po-agent", "writer")
    assert agents["My PO Agent"]["config"]["networkAccess"] == {"values": ["Report Writer"]}
    recording.writes.clear()
    again = await apply_text(text, recording, admin)
    assert {change.ref: change.action for change in again if change.kind == "agent"} == {
        "named/my-po-agent": Action.UNCHANGED,
        "named/writer": Action.UNCHANGED,
    }
    assert recording.writes == []
    renamed = text.replace("slug: writer", "slug: report-writer")
    with pytest.raises(ApplyError) as raised:
        await apply_text(renamed, recording, admin)
    assert "cannot change" in str(raised.value)


# --- Bad files: a clear error naming the place, and nothing written --------------------------------

AGENT = "projects[0].agents[1]"


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
    env = {**_cli_env(), "AGENTMESH_EMAIL": "member@example.com", "AGENTMESH_PASSWORD": "member-password-1"}
    result = await invoke(app, ["apply", "-f", str(file), "--registry", registry_address], env=env)
    assert result.exit_code == 1
    assert "ours" in result.stdout and "created" in result.stdout
    assert "applying stopped; the objects above were applied" in result.stderr
    assert "projects[1]: project slug 'demo' is taken" in result.stderr


# --- The command -------------------------------------------------------------------------------------


def _cli_env() -> dict[str, str | None]:
    names = ("AGENTMESH_EMAIL", "AGENTMESH_PASSWORD", "AGENTMESH_TOKEN", "AGENTMESH_REGISTRY_ADDRESS")
    return dict.fromkeys(names)


async def test_command_prints_a_summary_and_reports_bad_files(
    tmp_path: Path, registry_address: str, admin: Connection
) -> None:
    file = tmp_path / "mesh.yaml"
    file.write_text(MESH_YAML)
    args = ["apply", "-f", str(file), "--registry", registry_address]
    env = {**_cli_env(), "AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}

    dry = await invoke(app, [*args, "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would create" in dry.output
    assert "dry run, nothing changed: 7 would create, 0 would update, 0 unchanged" in dry.output

    first = await invoke(app, args, env=env)
    assert first.exit_code == 0, first.output
    assert "demo/coordinator" in first.output
    assert "7 created, 0 updated, 0 unchanged" in first.output

    file.write_text(MESH_YAML.replace("max_steps: 4", "max_steps: 6"))
    second = await invoke(app, args, env=env)
    assert second.exit_code == 0, second.output
    assert "updated (config.max_steps)" in second.output
    assert "0 created, 1 updated, 6 unchanged" in second.output

    file.write_text(MESH_YAML.replace("network_access: [coordinator]", "network_acess: [coordinator]"))
    bad = await invoke(app, args, env=env)
    assert bad.exit_code == 1
    assert "nothing was applied" in bad.stderr
    assert f"{AGENT}.config.network_acess: unknown field" in bad.stderr

    file.write_text(MESH_YAML)
    wrong_password = await invoke(app, [*args, "--password", "not-the-password"], env=env)
    assert wrong_password.exit_code == 1
    assert f"sign-in as {SUPERUSER_EMAIL} failed" in wrong_password.stderr

    anonymous = await invoke(app, args, env=_cli_env())
    assert anonymous.exit_code == 1
    assert "--email" in anonymous.stderr


async def test_command_runs_as_a_process_against_the_gateway(tmp_path: Path, mesh: Mesh) -> None:
    file = tmp_path / "mesh.yaml"
    file.write_text(MESH_YAML)
    env = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD, "COLUMNS": "120"}
    args = ("apply", "-f", str(file), "--registry", mesh.gateway.address)

    code, out, err = await run_agentmesh(*args, env=env)
    assert code == 0, err
    assert "7 created, 0 updated, 0 unchanged" in out
    code, out, err = await run_agentmesh(*args, env=env)
    assert code == 0, err
    assert "0 created, 0 updated, 7 unchanged" in out
