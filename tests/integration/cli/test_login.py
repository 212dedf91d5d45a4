"""`agentmesh login` / `logout`, and `agentmesh trace SESSION_ID` through the gateway signed in like
every other command. Each command runs as a real process against the in-process mesh, with its
own config directory."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import grpc
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from tests.integration.cli.support import cli, run_agentmesh
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient


@pytest.fixture
async def session(client: MeshClient) -> tuple[str, str]:
    """A chat's session id and its project's slug."""
    token = await client.login()
    seeded = await client.seed_agent(token, name="Trace Me", mock_responses=["traced answer"])
    responses = await client.stream_chat(seeded, "hello trace")
    return responses[0].event.session_id, seeded.project_slug


async def test_login_keeps_the_cli_signed_in_until_logout(
    mesh: Mesh, client: MeshClient, session: tuple[str, str], tmp_path: Path
) -> None:
    session_id, project = session
    gateway = mesh.gateway.address
    credentials = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}

    code, output = await cli("login", "--gateway", gateway, config=tmp_path, env=credentials)
    assert code == 0, output
    assert f"signed in to {gateway} as {SUPERUSER_EMAIL}" in output
    kept = tmp_path / "credentials.json"
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    stored = json.loads(kept.read_text())
    assert stored.keys() == {"address", "email", "refresh_token"}  # never the password
    assert SUPERUSER_PASSWORD not in kept.read_text()

    # Twice, so the refresh token the first command rotated is the one the second one uses.
    for _ in range(2):
        code, output = await cli(
            "trace", session_id, "--project", project, "--gateway", gateway, config=tmp_path
        )
        assert code == 0, output
        assert "hello trace" in output and "traced answer" in output
    rotated = json.loads(kept.read_text())["refresh_token"]
    assert rotated != stored["refresh_token"]

    # Commands sharing the login at the same moment take turns with its refresh token: a token
    # spent twice would make the registry revoke the whole sign-in.
    trace = ("trace", session_id, "--project", project, "--gateway", gateway)
    config = {"AGENTMESH_CONFIG_DIR": str(tmp_path)}
    runs = await asyncio.gather(*(run_agentmesh(*trace, env=config, timeout=120) for _ in range(3)))
    assert [code for code, _, _ in runs] == [0, 0, 0], runs
    last = json.loads(kept.read_text())["refresh_token"]

    code, output = await cli("logout", config=tmp_path)
    assert code == 0, output
    assert not kept.exists()
    assert not (tmp_path / "credentials.json.lock").exists()  # the login's lock went with it
    with pytest.raises(grpc.aio.AioRpcError) as revoked:  # revoked in the mesh, not only forgotten here
        await client.registry.RefreshTokens(reg.RefreshTokensRequest(refresh_token=last))
    assert revoked.value.code() == grpc.StatusCode.UNAUTHENTICATED

    code, output = await cli("trace", session_id, "--project", project, "--gateway", gateway, config=tmp_path)
    assert code == 1
    assert "agentmesh login" in output


async def test_trace_as_written_names_what_is_missing(
    mesh: Mesh, client: MeshClient, session: tuple[str, str], tmp_path: Path
) -> None:
    session_id, project = session
    signed_in = {
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
    }

    code, output = await cli("trace", session_id, config=tmp_path, env=signed_in)
    assert code == 0, output
    assert "traced answer" in output

    code, output = await cli(
        "trace", session_id, "--project", "no-such-project", config=tmp_path, env=signed_in
    )
    assert code == 1
    assert "no project 'no-such-project'" in output

    code, output = await cli("trace", "no-such-session", "--project", project, config=tmp_path, env=signed_in)
    assert code == 1
    assert f"no session 'no-such-session' in project '{project}'" in output

    code, output = await cli(
        "login",
        "--gateway",
        mesh.gateway.address,
        "--email",
        SUPERUSER_EMAIL,
        config=tmp_path,
        env={"AGENTMESH_PASSWORD": "not the password"},
    )
    assert code == 1
    assert "sign-in as" in output and not (tmp_path / "credentials.json").exists()
