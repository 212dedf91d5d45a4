"""`agentmesh apply` and a declared agent that was terminated: a plain apply leaves it as it is and
warns, naming it and the way back; `--recreate-terminated` creates it again under the same name
and slug with the config it had (and the file's), while the terminated one keeps its id under a
name that says it was terminated. Through the command, against an in-process mesh."""

from __future__ import annotations

from pathlib import Path

from agentmesh.cli.client import Connection
from agentmesh.cli.main import app
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.apply_support import MESH_YAML, cli_env
from tests.integration.cli.support import invoke
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD


async def test_a_terminated_agent_is_reported_and_recreated_on_request(
    tmp_path: Path, registry_address: str, admin: Connection
) -> None:
    file = tmp_path / "mesh.yaml"
    file.write_text(MESH_YAML)
    args = ["apply", "-f", str(file), "--gateway", registry_address]
    env = {**cli_env(), "AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}
    assert (await invoke(app, args, env=env)).exit_code == 0
    project = await admin.registry.get_project(slug="demo", metadata=admin.metadata)
    worker = await admin.registry.get_agent(project.id, "worker", metadata=admin.metadata)
    await admin.registry.delete_agent(project.id, worker.id, metadata=admin.metadata)

    # A plain apply changes nothing, and says which agent is terminated and how to bring it back.
    plain = await invoke(app, args, env=env)
    assert plain.exit_code == 0, plain.output
    assert "0 created, 0 updated, 7 unchanged" in plain.output
    assert "warning: agent demo/worker: it is terminated and takes no runs" in plain.stderr
    assert "--recreate-terminated" in plain.stderr
    assert "demo/coordinator" not in plain.stderr
    # A change to it is refused with the same way back.
    file.write_text(MESH_YAML.replace("You process tasks.", "You process jobs."))
    changed = await invoke(app, args, env=env)
    assert changed.exit_code == 1
    assert (
        "is terminated and cannot be changed" in changed.stderr and "--recreate-terminated" in changed.stderr
    )

    dry = await invoke(app, [*args, "--recreate-terminated", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "would create (in place of the terminated one)" in dry.output
    recreated = await invoke(app, [*args, "--recreate-terminated"], env=env)
    assert recreated.exit_code == 0, recreated.output
    assert "created (in place of the terminated one)" in recreated.output
    assert "1 created, 0 updated, 6 unchanged" in recreated.output

    # The same name and slug, the config it had with the file's change; idle, a new agent.
    again = await admin.registry.get_agent(project.id, "worker", metadata=admin.metadata)
    assert (again.name, again.slug, again.status) == ("worker", "worker", resources_pb2.AGENT_STATUS_IDLE)
    assert again.id != worker.id
    assert again.config.instructions == "You process jobs."
    assert list(again.config.network_access.values) == ["coordinator"]
    old = await admin.registry.get_agent(project.id, worker.id, metadata=admin.metadata)
    assert old.status == resources_pb2.AGENT_STATUS_TERMINATED
    assert old.name.startswith("worker (terminated ") and old.slug.startswith("worker-terminated-")

    # From then on, the file matches the mesh: nothing to do and nothing to warn about.
    settled = await invoke(app, args, env=env)
    assert settled.exit_code == 0, settled.output
    assert "0 created, 0 updated, 7 unchanged" in settled.output
    assert "warning" not in settled.stderr
