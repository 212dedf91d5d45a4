"""`agentmesh apply` with schedules (a project's `schedules`): written after the agents they
name, unchanged on a second run, updated field by field, and a bad cron or an unknown agent
reported before any write."""

from __future__ import annotations

import textwrap
import uuid

import pytest

from agentmesh.cli.apply.document import ApplyError, load_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.cli.client import Connection
from agentmesh.registry.client import RegistryClient

# What is stored is the store contract's (test_schedule_store_contract.py, on both databases):
# the faces run once, on SQLite.
ONCE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def mesh_yaml(slug: str, *, cron: str = "0 7 * * 1-5", agent: str = "reporter") -> str:
    return textwrap.dedent(
        f"""\
        agent_types:
          - name: Scheduled Reporter
            slug: scheduled-reporter
            primary_model: mock
        projects:
          - name: Scheduled {slug}
            slug: {slug}
            agents:
              - name: reporter
                type: scheduled-reporter
            schedules:
              - name: weekday-report
                agent: {agent}
                message: "Report for {{{{scheduled_for}}}}"
                cron: "{cron}"
                time_zone: Europe/Paris
                overlap_policy: queue
        """
    )


async def apply_text(text: str, caller: Connection) -> list[Change]:
    return await apply_manifest(load_manifest(text), RegistryClient(caller.channel), metadata=caller.metadata)


@ONCE
async def test_schedules_are_applied_after_their_agents(admin: Connection) -> None:
    slug = f"sched-{uuid.uuid4().hex[:8]}"
    changes = await apply_text(mesh_yaml(slug), admin)
    assert [(c.kind, c.ref, c.action) for c in changes][-2:] == [
        ("agent", f"{slug}/reporter", Action.CREATE),
        ("schedule", f"{slug}/weekday-report", Action.CREATE),
    ]
    assert {c.action for c in await apply_text(mesh_yaml(slug), admin)} == {Action.UNCHANGED}
    updated = await apply_text(mesh_yaml(slug, cron="30 7 * * 1-5"), admin)
    assert ("schedule", Action.UPDATE, ("cron",)) in [(c.kind, c.action, c.fields) for c in updated]

    for bad, field in ((mesh_yaml(slug, cron="7 * *"), "cron"), (mesh_yaml(slug, agent="nobody"), "agent")):
        with pytest.raises(ApplyError) as raised:
            await apply_text(bad.replace("weekday-report", "other"), admin)
        assert [p.field for p in raised.value.problems] == [f"projects[0].schedules[0].{field}"]
        assert not raised.value.applied
