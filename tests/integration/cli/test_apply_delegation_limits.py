"""`agentmesh apply` with an agent type's delegation bounds: made so, left alone when unchanged,
and updated when they change."""

from __future__ import annotations

import textwrap

from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot

BOUNDED_YAML = textwrap.dedent(
    """\
    agent_types:
      - name: Bounded Type
        slug: bounded-type
        primary_model: mock
        delegation_limits: {max_per_step: 2, max_per_chat: 20, allow_reentry: true}
    """
)


async def test_delegation_limits_are_applied_once_then_left_alone_then_updated(
    recording: RecordingRegistry, admin: Connection
) -> None:
    created = await apply_text(BOUNDED_YAML, recording, admin)
    assert [change.action for change in created] == [Action.CREATE]
    state = await snapshot(recording, admin.metadata)
    assert state["agent_types"]["bounded-type"]["delegationLimits"] == {
        "maxPerStep": 2,
        "maxPerChat": 20,
        "allowReentry": True,
    }
    recording.writes.clear()

    again = await apply_text(BOUNDED_YAML, recording, admin)
    assert again == [Change(c.kind, c.ref, Action.UNCHANGED) for c in created]
    assert recording.writes == []

    changes = await apply_text(BOUNDED_YAML.replace("max_per_chat: 20", "max_per_chat: 5"), recording, admin)
    assert actions(changes) == {"bounded-type": (Action.UPDATE, ("delegation_limits",))}
    state = await snapshot(recording, admin.metadata)
    assert state["agent_types"]["bounded-type"]["delegationLimits"]["maxPerChat"] == 5
