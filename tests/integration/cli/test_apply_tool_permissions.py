"""`agentmesh apply` with tool permissions on agent types, agents' configs and projects: made so,
left alone when unchanged, changed rule map by rule map, and bad rules refused before any write."""

from __future__ import annotations

import textwrap

import pytest

from agentmesh.cli.apply.document import ApplyError
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot

GUARDED_YAML = textwrap.dedent(
    """\
    agent_types:
      - name: Guarded Type
        slug: guarded-type
        primary_model: mock
        tools: [get_current_time]
        tool_permissions: {get_current_time: allow, "mcp:*": ask, "delegate:*": deny}
        input_expiry_seconds: 3600
    projects:
      - name: Guarded
        slug: guarded
        tool_permissions: {"mcp:files:*": deny}
        agents:
          - name: careful
            type: guarded-type
            config:
              tool_permissions: {get_current_time: ask}
    """
)


async def test_permissions_are_applied_once_and_then_left_alone(
    recording: RecordingRegistry, admin: Connection
) -> None:
    created = await apply_text(GUARDED_YAML, recording, admin)
    assert [change.action for change in created] == [Action.CREATE] * 3
    state = await snapshot(recording, admin.metadata)
    agent_type = state["agent_types"]["guarded-type"]
    assert agent_type["toolPermissions"] == {
        "get_current_time": "TOOL_PERMISSION_ALLOW",
        "mcp:*": "TOOL_PERMISSION_ASK",
        "delegate:*": "TOOL_PERMISSION_DENY",
    }
    assert agent_type["inputExpirySeconds"] == 3600
    project = state["projects"]["guarded"]
    assert project["toolPermissions"] == {"mcp:files:*": "TOOL_PERMISSION_DENY"}
    config = project["agents"]["careful"]["config"]
    assert config["toolPermissions"] == {"get_current_time": "TOOL_PERMISSION_ASK"}
    recording.writes.clear()

    again = await apply_text(GUARDED_YAML, recording, admin)

    assert again == [Change(c.kind, c.ref, Action.UNCHANGED) for c in created]
    assert recording.writes == []
    assert await snapshot(recording, admin.metadata) == state


async def test_a_changed_rule_updates_only_its_map(recording: RecordingRegistry, admin: Connection) -> None:
    await apply_text(GUARDED_YAML, recording, admin)
    recording.writes.clear()
    changed = (
        GUARDED_YAML.replace('"delegate:*": deny', '"delegate:*": ask')
        .replace('{"mcp:files:*": deny}', '{"mcp:files:*": deny, "mcp:mail:send": deny}')
        .replace("tool_permissions: {get_current_time: ask}", "tool_permissions: null")
    )

    changes = await apply_text(changed, recording, admin)

    assert actions(changes) == {
        "guarded-type": (Action.UPDATE, ("tool_permissions",)),
        "guarded": (Action.UPDATE, ("tool_permissions",)),
        "guarded/careful": (Action.UPDATE, ("config.tool_permissions",)),
    }
    state = await snapshot(recording, admin.metadata)
    assert state["agent_types"]["guarded-type"]["toolPermissions"]["delegate:*"] == "TOOL_PERMISSION_ASK"
    assert set(state["projects"]["guarded"]["toolPermissions"]) == {"mcp:files:*", "mcp:mail:send"}
    assert "toolPermissions" not in state["projects"]["guarded"]["agents"]["careful"]["config"]


@pytest.mark.parametrize(
    ("edit", "path", "message"),
    [
        pytest.param(
            ("get_current_time: allow", "get_current_time: maybe"),
            "agent_types[0].tool_permissions.get_current_time",
            "'allow', 'ask' or 'deny'",
            id="unknown-permission",
        ),
        pytest.param(
            ('{"mcp:files:*": deny}', '{"mcp files": deny}'),
            "projects[0].tool_permissions",
            "key 'mcp files'",
            id="whitespace-in-a-key",
        ),
        pytest.param(
            ("{get_current_time: ask}", '{"": ask}'),
            "projects[0].agents[0].config.tool_permissions",
            "key ''",
            id="empty-key",
        ),
        pytest.param(
            ("input_expiry_seconds: 3600", "input_expiry_seconds: -5"),
            "agent_types[0].input_expiry_seconds",
            "between 0 and 2592000",
            id="negative-expiry",
        ),
    ],
)
async def test_bad_rules_are_refused_before_any_write(
    recording: RecordingRegistry, admin: Connection, edit: tuple[str, str], path: str, message: str
) -> None:
    with pytest.raises(ApplyError) as refused:
        await apply_text(GUARDED_YAML.replace(*edit), recording, admin)
    assert [(p.field, message in p.description) for p in refused.value.problems] == [(path, True)]
    assert recording.writes == []
