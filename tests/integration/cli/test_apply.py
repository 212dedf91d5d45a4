"""`agentmesh apply`: declared agent types, projects and agents made so in a real mesh — created,
updated field by field, left alone when unchanged."""

from __future__ import annotations

import textwrap

import pytest

from agentmesh.cli.apply.document import ApplyError
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import ALL_CREATED, MESH_YAML, actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot


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
