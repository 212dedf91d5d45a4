"""`agentmesh apply` with a project's limits: made so, left alone when unchanged, changed as a
whole, and an owner's raise refused by the registry."""

from __future__ import annotations

import textwrap

from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from tests.integration.cli.apply_support import actions, apply_text
from tests.integration.cli.support import RecordingRegistry, snapshot

LIMITED_YAML = textwrap.dedent(
    """\
    projects:
      - name: Limited
        slug: limited
        limits: {concurrent_runs: 4, requests_per_minute: 600}
    """
)


async def test_limits_are_applied_once_then_left_alone_then_changed(
    recording: RecordingRegistry, admin: Connection
) -> None:
    created = await apply_text(LIMITED_YAML, recording, admin)
    assert [change.action for change in created] == [Action.CREATE]
    state = await snapshot(recording, admin.metadata)
    assert state["projects"]["limited"]["limits"] == {"concurrentRuns": "4", "requestsPerMinute": "600"}
    recording.writes.clear()

    again = await apply_text(LIMITED_YAML, recording, admin)
    assert again == [Change(c.kind, c.ref, Action.UNCHANGED) for c in created]
    assert recording.writes == []

    changed = await apply_text(
        LIMITED_YAML.replace("requests_per_minute: 600", "open_streams: 10"), recording, admin
    )
    assert actions(changed) == {"limited": (Action.UPDATE, ("limits",))}
    state = await snapshot(recording, admin.metadata)
    assert state["projects"]["limited"]["limits"] == {"concurrentRuns": "4", "openStreams": "10"}
