"""`agentmesh invitations create | list | revoke`, signed in as a superuser, each command a real
process against the in-process mesh: the token is printed once, listed never, and revoking marks it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD

TOKEN = re.compile(r"\bami_[A-Za-z0-9_-]{43}\b")
SIGNED_IN = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}
pytestmark = pytest.mark.timeout(300)


async def test_invitations_are_issued_listed_and_revoked(mesh: Mesh, tmp_path: Path) -> None:
    gateway = ("--gateway", mesh.gateway.address)
    code, output = await cli(
        "invitations", "create", "--expires-in-hours", "2", *gateway, config=tmp_path, env=SIGNED_IN
    )
    assert code == 0, output
    (token,) = TOKEN.findall(output)
    assert "not shown again" in output

    code, output = await cli("invitations", "list", "-o", "json", *gateway, config=tmp_path, env=SIGNED_IN)
    assert code == 0, output
    (listed,) = json.loads(output)
    assert listed.get("revoked_at") is None and token not in output

    code, output = await cli("invitations", "revoke", listed["id"], *gateway, config=tmp_path, env=SIGNED_IN)
    assert code == 0 and "revoked" in output, output
    code, output = await cli("invitations", "list", "-o", "json", *gateway, config=tmp_path, env=SIGNED_IN)
    assert json.loads(output)[0]["revoked_at"]
