"""`agentmesh apply` with an agent's `public` key: a new agent is made published, an unchanged file
writes nothing, and turning the key off is an update of `public` alone (left out, an agent keeps
what it is)."""

from __future__ import annotations

import textwrap

from agentmesh.cli.apply.plan import Action
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot

PUBLIC_YAML = textwrap.dedent(
    """\
    agent_types:
      - name: Greeter Type
        slug: greeter-type
        primary_model: mock
    projects:
      - name: Lobby
        slug: lobby
        agents:
          - name: greeter
            type: greeter-type
            public: true
    """
)


async def test_public_is_applied_then_left_alone_then_turned_off(
    recording: RecordingRegistry, admin: Connection
) -> None:
    await apply_text(PUBLIC_YAML, recording, admin)
    agent = (await snapshot(recording, admin.metadata))["projects"]["lobby"]["agents"]["greeter"]
    assert agent["public"] is True
    recording.writes.clear()

    assert actions(await apply_text(PUBLIC_YAML, recording, admin))["lobby/greeter"][0] is Action.UNCHANGED
    left_out = PUBLIC_YAML.replace("            public: true\n", "")
    assert actions(await apply_text(left_out, recording, admin))["lobby/greeter"][0] is Action.UNCHANGED
    assert recording.writes == []

    changes = actions(await apply_text(PUBLIC_YAML.replace("true", "false"), recording, admin))
    assert changes["lobby/greeter"] == (Action.UPDATE, ("public",))
    agent = (await snapshot(recording, admin.metadata))["projects"]["lobby"]["agents"]["greeter"]
    assert agent.get("public", False) is False
