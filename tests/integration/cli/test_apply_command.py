"""`agentmesh apply` as a command: its summary (with the agents' new versions), its report of bad
files, and a run as a process against a mesh's gateway."""

from __future__ import annotations

from pathlib import Path

from agentmesh.cli.client import Connection
from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from tests.integration.cli.apply_support import AGENT, MESH_YAML, cli_env
from tests.integration.cli.support import invoke, run_agentmesh
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD


async def test_command_prints_a_summary_and_reports_bad_files(
    tmp_path: Path, registry_address: str, admin: Connection
) -> None:
    file = tmp_path / "mesh.yaml"
    file.write_text(MESH_YAML)
    args = ["apply", "-f", str(file), "--gateway", registry_address]
    env = {**cli_env(), "AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}

    dry = await invoke(app, [*args, "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would create" in dry.output
    assert "dry run, nothing changed: 7 would create, 0 would update, 0 unchanged" in dry.output

    first = await invoke(app, args, env=env)
    assert first.exit_code == 0, first.output
    assert "demo/coordinator" in first.output
    assert "7 created, 0 updated, 0 unchanged" in first.output

    file.write_text(MESH_YAML.replace("max_steps: 4", "max_steps: 6"))
    second = await invoke(app, args, env=env)
    assert second.exit_code == 0, second.output
    assert "updated (config.max_steps)" in second.output
    assert "0 created, 1 updated, 6 unchanged" in second.output
    # Version 2 was the creation's second write, which set network_access once the worker existed.
    assert "agent demo/coordinator: version 3 (config.max_steps changed)" in second.output

    # A change of a type is a new version of its agents, which the file leaves unchanged.
    file.write_text(MESH_YAML.replace("max_steps: 4", "max_steps: 6").replace("You coordinate.", "You lead."))
    third = await invoke(app, args, env=env)
    assert third.exit_code == 0, third.output
    assert "0 created, 1 updated, 6 unchanged" in third.output
    assert "agent demo/coordinator: version 4 (agent_type.personality_prompt changed)" in third.output
    assert "demo/worker: version" not in third.output

    file.write_text(MESH_YAML.replace("network_access: [coordinator]", "network_acess: [coordinator]"))
    bad = await invoke(app, args, env=env)
    assert bad.exit_code == 1
    assert "nothing was applied" in bad.stderr
    assert f"{AGENT}.config.network_acess: unknown field" in bad.stderr

    file.write_text(MESH_YAML)
    wrong_password = await invoke(app, [*args, "--password", "not-the-password"], env=env)
    assert wrong_password.exit_code == 1
    assert f"sign-in as {SUPERUSER_EMAIL} failed" in wrong_password.stderr

    anonymous = await invoke(app, args, env=cli_env())
    assert anonymous.exit_code == 1
    assert "--email" in anonymous.stderr


async def test_command_runs_as_a_process_against_the_gateway(tmp_path: Path, mesh: Mesh) -> None:
    file = tmp_path / "mesh.yaml"
    file.write_text(MESH_YAML)
    env = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD, "COLUMNS": "120"}
    args = ("apply", "-f", str(file), "--gateway", mesh.gateway.address)

    code, out, err = await run_agentmesh(*args, env=env)
    assert code == 0, err
    assert "7 created, 0 updated, 0 unchanged" in out
    code, out, err = await run_agentmesh(*args, env=env)
    assert code == 0, err
    assert "0 created, 0 updated, 7 unchanged" in out
