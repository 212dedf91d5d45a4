"""`agentmesh get | describe | delete`: kubectl-style reads and deletes through the gateway, each
command a real process, as a table, JSON or YAML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import cli
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, Seeded


@pytest.fixture
def signed_in(mesh: Mesh) -> dict[str, str]:
    return {
        "AGENTMESH_EMAIL": SUPERUSER_EMAIL,
        "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
    }


@pytest.fixture
async def seeded(client: MeshClient) -> tuple[Seeded, str]:
    """An agent named as people write names, and the session of one chat with it."""
    seeded = await client.seed_agent(await client.login(), name="Report Writer", mock_responses=["done"])
    responses = await client.stream_chat(seeded, "write it")
    return seeded, responses[0].event.session_id


async def test_get_lists_and_shows_as_a_table_json_or_yaml(
    seeded: tuple[Seeded, str], signed_in: dict[str, str], tmp_path: Path
) -> None:
    agent, session_id = seeded
    project = agent.project_slug

    code, out = await cli("get", "projects", config=tmp_path, env=signed_in)
    assert code == 0, out
    assert "SLUG" in out and project in out

    code, out = await cli("get", "agents", "--project", project, config=tmp_path, env=signed_in)
    assert code == 0, out
    row = next(line for line in out.splitlines() if "report-writer" in line)
    assert "Report Writer" in row and "idle" in row
    assert "PUBLIC" in out and " no " in row  # not published: its A2A card needs a credential

    code, out = await cli("get", "agents", "-p", project, "-o", "json", config=tmp_path, env=signed_in)
    assert code == 0, out
    agents = json.loads(out)
    assert [(a["slug"], a["name"], a["status"]) for a in agents] == [
        ("report-writer", "Report Writer", "idle")
    ]

    # One agent, by its exact name, as YAML: every field, enum values as REST writes them.
    code, out = await cli(
        "get", "agent", "Report Writer", "-p", project, "-o", "yaml", config=tmp_path, env=signed_in
    )
    assert code == 0, out
    shown = yaml.safe_load(out)
    assert shown["slug"] == "report-writer" and shown["id"] == agent.agent_id and shown["status"] == "idle"

    code, out = await cli("get", "sessions", "-p", project, config=tmp_path, env=signed_in)
    assert code == 0, out
    assert session_id in out

    code, out = await cli("describe", "session", session_id, "-p", project, config=tmp_path, env=signed_in)
    assert code == 0, out
    session = yaml.safe_load(out)
    assert session["id"] == session_id and int(session["last_seq"]) >= 2

    code, out = await cli("get", "mcp-servers", config=tmp_path, env=signed_in)
    assert (code, out.strip()) == (0, "no mcp-servers")


async def test_delete_and_what_cannot_be_asked(
    seeded: tuple[Seeded, str], signed_in: dict[str, str], tmp_path: Path
) -> None:
    agent, session_id = seeded
    project = agent.project_slug

    # An agent is terminated: final, and kept with its history.
    code, out = await cli("delete", "agent", "report-writer", "-p", project, config=tmp_path, env=signed_in)
    assert code == 0, out
    assert "terminated" in out.lower()
    code, out = await cli(
        "get", "agent", "report-writer", "-p", project, "-o", "json", config=tmp_path, env=signed_in
    )
    assert code == 0, out
    assert json.loads(out)["status"] == "terminated"

    code, out = await cli("delete", "session", session_id, "-p", project, config=tmp_path, env=signed_in)
    assert code == 1
    assert "append-only" in out

    code, out = await cli("delete", "project", project, config=tmp_path, env=signed_in)
    assert code == 0, out
    code, out = await cli("get", "project", project, config=tmp_path, env=signed_in)
    assert code == 1
    assert out == f"error: no project {project!r} that you may see\n"  # which one, by its name

    code, out = await cli("get", "agents", config=tmp_path, env=signed_in)
    assert code == 1
    assert "--project" in out

    code, out = await cli("get", "widgets", config=tmp_path, env=signed_in)
    assert code == 1
    assert "unknown kind 'widgets'" in out

    code, out = await cli("get", "agents", "-p", "no-such-project", config=tmp_path, env=signed_in)
    assert code == 1
    assert "no project 'no-such-project'" in out
