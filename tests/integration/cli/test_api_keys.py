"""`agentmesh api-keys create | list | revoke`, and an API key as the CLI's credentials
(`AGENTMESH_API_KEY`). Each command runs as a real process against the in-process mesh."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient
from tests.polling import eventually

KEY = re.compile(r"\bamk_[A-Za-z0-9_-]{43}\b")
SIGNED_IN = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}
# Each command is a process of its own, seconds apiece on a loaded machine.
pytestmark = pytest.mark.timeout(400)


async def test_keys_are_made_listed_used_and_revoked(mesh: Mesh, tmp_path: Path) -> None:
    gateway = ("--gateway", mesh.gateway.address)

    code, output = await cli("api-keys", "create", "laptop", *gateway, config=tmp_path, env=SIGNED_IN)
    assert code == 0, output
    found = KEY.findall(output)
    assert len(found) == 1 and "not shown again" in output
    key = found[0]
    as_key = {"AGENTMESH_API_KEY": key}

    # The key signs the CLI in: it lists the keys, never a secret.
    code, output = await cli("api-keys", "list", "-o", "json", *gateway, config=tmp_path, env=as_key)
    assert code == 0, output
    listed = json.loads(output)
    assert [k["prefix"] for k in listed] == [key[:12]] and key not in output

    code, output = await cli("api-keys", "revoke", key[:12], *gateway, config=tmp_path, env=SIGNED_IN)
    assert code == 0 and "revoked" in output, output

    async def refused() -> bool:
        code, output = await cli("get", "projects", *gateway, config=tmp_path, env=as_key)
        return code == 1 and "API key is unknown or revoked" in output and key not in output

    await eventually(refused, timeout=120, what="the revoked key refused by the CLI's command")


async def test_a_scoped_key_works_in_its_project_only(mesh: Mesh, client: MeshClient, tmp_path: Path) -> None:
    gateway = ("--gateway", mesh.gateway.address)
    seeded = await client.seed_agent(await client.login(), name="Keyed")
    code, output = await cli(
        "api-keys",
        "create",
        "bot",
        "--project",
        seeded.project_slug,
        *gateway,
        config=tmp_path,
        env=SIGNED_IN,
    )
    assert code == 0, output
    scoped = {"AGENTMESH_API_KEY": KEY.findall(output)[0]}
    code, output = await cli(
        "get", "agents", "-p", seeded.project_slug, *gateway, config=tmp_path, env=scoped
    )
    assert code == 0 and "Keyed" in output, output
    code, output = await cli("get", "projects", *gateway, config=tmp_path, env=scoped)
    assert code == 1 and "scoped to one project" in output, output


async def test_revoking_an_unknown_key_says_so(mesh: Mesh, tmp_path: Path) -> None:
    code, output = await cli(
        "api-keys",
        "revoke",
        "amk_nothing1",
        "--gateway",
        mesh.gateway.address,
        config=tmp_path,
        env=SIGNED_IN,
    )
    assert code == 1
    assert "no API key of yours has the id or prefix 'amk_nothing1'" in output
