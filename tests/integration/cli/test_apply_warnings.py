"""A declared model or tool that the running executors cannot serve is said when it is declared,
so a mistake shows before a chat fails, through every way of declaring: `agentmesh apply` prints
the registry's warnings with the fix, REST answers with `Warning` headers; the objects are still
written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.client import RegistryClient
from tests.bearer import authorized_channel
from tests.integration.cli.support import agentmesh
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD
from tests.polling import eventually

TYPO_YAML = textwrap.dedent(
    """\
    version: 1
    agent_types:
      - name: Researcher
        slug: researcher
        description: Looks things up
        primary_model: opneai/gpt-4o-mini
        tools: [get_curent_time]
    projects:
      - name: Lab
        slug: lab
        agents:
          - name: scout
            type: researcher
            config:
              primary_model: openai/gpt-4o-mini
    """
)


async def _executor_reported_in(mesh: Mesh) -> None:
    """The in-process executor's first heartbeat (with what it offers) has reached the registry
    (asked as a mesh service asks: ListExecutors is internal)."""
    async with authorized_channel(mesh.services["registry"].address) as channel:
        registry = RegistryClient(channel)

        async def offered() -> bool:
            return any("get_current_time" in e.tools for e in await registry.list_executors())

        await eventually(offered, timeout=30, what="the executor reports its tools")


async def test_apply_warns_with_the_fix_and_still_applies(tmp_path: Path, mesh: Mesh) -> None:
    await _executor_reported_in(mesh)
    file = tmp_path / "mesh.yaml"
    file.write_text(TYPO_YAML)
    env = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}

    code, out, err = await agentmesh("apply", "-f", str(file), "--gateway", mesh.gateway.address, env=env)

    assert code == 0, err
    assert "3 created" in out
    lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 4, err
    type_model, type_tool, agent_model, agent_tool = lines
    assert type_model.startswith("warning: agent type researcher: model 'opneai/gpt-4o-mini': no running")
    assert "did you mean 'openai'?" in type_model
    assert "tool 'get_curent_time' is not offered" in type_tool
    assert "did you mean 'get_current_time'?" in type_tool
    # The mesh's executor has no OpenAI key: the agent's override is told which setting to set.
    assert agent_model.startswith("warning: agent lab/scout: model 'openai/gpt-4o-mini': ")
    assert "set AGENTMESH_OPENAI_API_KEY" in agent_model
    assert "tool 'get_curent_time'" in agent_tool


async def test_rest_answers_with_warning_headers(mesh: Mesh) -> None:
    await _executor_reported_in(mesh)
    async with httpx.AsyncClient(base_url=mesh.gateway.http.url, timeout=30) as http:
        login = await http.post(
            "/api/v1/auth/login", json={"email": SUPERUSER_EMAIL, "password": SUPERUSER_PASSWORD}
        )
        headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        body = {"name": "Typo", "slug": "typo", "primary_model": "opneai/x", "tools": ["serch"]}

        created = await http.post("/api/v1/agent-types", json=body, headers=headers)
        assert created.status_code == 201, created.text
        warnings = created.headers.get_list("warning")
        assert len(warnings) == 2
        assert warnings[0].startswith("299 - \"model 'opneai/x': no running executor has the provider")
        assert warnings[1].startswith("299 - \"tool 'serch' is not offered")

        fixed = await http.patch(
            f"/api/v1/agent-types/{created.json()['id']}",
            json={"primary_model": "mock", "tools": ["get_current_time"]},
            headers=headers,
        )
        assert fixed.status_code == 200, fixed.text
        assert "warning" not in fixed.headers
