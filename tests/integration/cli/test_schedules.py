"""`agentmesh schedules create | list | delete`, each a real process against the in-process mesh:
a schedule is made, listed with when it fires next, and deleted by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient

SIGNED_IN = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}
pytestmark = pytest.mark.timeout(400)
# What is stored is the store contract's (test_schedule_store_contract.py, on both databases):
# the faces run once, on SQLite.
ONCE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@ONCE
async def test_a_schedule_is_created_listed_and_deleted(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    seeded = await client.seed_agent(await client.login(), name="reporter")
    where = ("-p", seeded.project_slug, "--gateway", mesh.gateway.address)
    code, output = await cli(
        "schedules",
        "create",
        "nightly",
        "--agent",
        "reporter",
        "--cron",
        "0 2 * * *",
        "--tz",
        "Europe/Paris",
        "-m",
        "Report for {{scheduled_for}}",
        "-o",
        "json",
        *where,
        config=tmp_path,
        env=SIGNED_IN,
    )
    assert code == 0, output
    created = json.loads(output)
    assert created["next_fire_at"] and created["time_zone"] == "Europe/Paris"

    code, output = await cli("schedules", "list", "-o", "json", *where, config=tmp_path, env=SIGNED_IN)
    assert code == 0, output
    assert [s["name"] for s in json.loads(output)] == ["nightly"]

    code, output = await cli("schedules", "delete", "nightly", *where, config=tmp_path, env=SIGNED_IN)
    assert code == 0 and "deleted" in output, output
