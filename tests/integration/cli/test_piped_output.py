"""The CLI read by a program: run as a process with its output piped (not a terminal), it writes
plain, complete lines, never wrapped at the 80 columns a pipe is given and never cutting an id; its
errors are its own words, naming what was not found. Each case compares the exact bytes."""

from __future__ import annotations

from pathlib import Path

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from tests.integration.cli.support import run_agentmesh
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, bearer

NARROW = {"COLUMNS": "80"}  # what a pipe was laid out for; it must not matter
ANSWER = (
    "A reply longer than eighty columns, so that a pipe would once have cut it in two: it stays one line."
)
USAGE = {"input_tokens": 3, "output_tokens": 4}


async def test_a_piped_chat_is_whole_lines_ending_with_the_trace_command(
    mesh: Mesh, client: MeshClient
) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=[{"content": ANSWER, "usage": USAGE}])
    first = await client.stream_chat(seeded, "warm up")
    executor = first[0].event.run_started.executor_id

    code, out, err = await run_agentmesh(
        *("chat", seeded.ref, "hi there", "--session", "piped-1", "--gateway", mesh.gateway.address),
        env={"AGENTMESH_TOKEN": token, **NARROW},
    )

    assert (code, err) == (0, ""), err
    agent = seeded.agent_name
    assert out == (
        "you: hi there\n"
        f"{agent} starts (llm, mock) on executor {executor}\n"
        f"{agent} step 1\n"
        f"{agent} says: {ANSWER}\n"
        f"{agent} answered in 1 step(s), 7 tokens\n"
        f"{seeded.ref}: {ANSWER}\n"
        f"session piped-1 — agentmesh trace piped-1 --project {seeded.project_slug}\n"
    )


async def test_piped_tables_keep_every_id_whole(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token)
    gateway = ("--gateway", mesh.gateway.address)
    env = {"AGENTMESH_TOKEN": token, **NARROW}

    code, out, err = await run_agentmesh("get", "projects", *gateway, env=env)
    assert (code, err) == (0, ""), err
    slug, name = seeded.project_slug, f"p {seeded.project_slug.removeprefix('p-')}"
    assert out == f"{'SLUG':<{len(slug)}}  {'NAME':<{len(name)}}  ID\n{slug}  {name}  {seeded.project_id}\n"

    code, secret, _ = await run_agentmesh("api-keys", "create", "ci", *gateway, env=env)
    assert code == 0
    code, out, err = await run_agentmesh("api-keys", "list", *gateway, env=env)
    assert (code, err) == (0, ""), err
    listed = await client.registry.ListApiKeys(reg.ListApiKeysRequest(), metadata=bearer(token))
    key = next(k for k in listed.api_keys if secret.startswith(k.prefix))
    created = key.created_at.ToJsonString()
    assert out == (
        f"{'ID':<36}  NAME  {'PREFIX':<{len(key.prefix)}}  PROJECT ID  {'CREATED AT':<{len(created)}}  "
        "EXPIRES AT  REVOKED AT\n"
        f"{key.id}  ci    {key.prefix}  -           {created}  -           -\n"
    )
    code, out, err = await run_agentmesh("api-keys", "revoke", key.prefix, *gateway, env=env)
    assert (code, out, err) == (0, f"API key {key.id} (ci) revoked\n", "")


async def test_what_is_not_found_is_named(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token)
    env = {"AGENTMESH_TOKEN": token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}

    cases = {
        ("describe", "project", "nope"): "error: no project 'nope' that you may see\n",
        ("get", "agents", "-p", "nope"): "error: no project 'nope' that you may see\n",
        ("describe", "agent", "nobody", "-p", seeded.project_slug): (
            f"error: no agent 'nobody' in project '{seeded.project_slug}' that you may see\n"
        ),
        ("chat", "nope/nobody", "hi"): "error: the chat failed: no project 'nope' that you may see\n",
    }
    for args, expected in cases.items():
        code, _, err = await run_agentmesh(*args, env=env)
        assert (code, err) == (1, expected), args


async def test_no_mesh_is_one_line_of_the_commands_own(tmp_path: Path) -> None:
    # No transport chatter from the libraries before it: a refresh of the kept login, or any call.
    code, _, err = await run_agentmesh(
        *("get", "projects", "--gateway", "127.0.0.1:1", "--email", SUPERUSER_EMAIL),
        env={"AGENTMESH_PASSWORD": SUPERUSER_PASSWORD, "AGENTMESH_CONFIG_DIR": str(tmp_path)},
    )
    assert (code, err) == (
        1,
        "error: cannot reach the mesh at 127.0.0.1:1: the registry service is unavailable\n",
    )
    code, _, err = await run_agentmesh(
        "get", "projects", "--gateway", "127.0.0.1:1", env={"AGENTMESH_TOKEN": "not-a-token"}
    )
    assert (code, err) == (1, "error: the mesh is unavailable: the registry service is unavailable\n")


DEPRECATED = (
    "agentmesh: --registry / AGENTMESH_REGISTRY_ADDRESS is deprecated (used as the gateway); "
    "use --gateway / AGENTMESH_GATEWAY_ADDRESS\n"
)


async def test_the_old_registry_address_still_works_and_says_it_is_deprecated(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    token = await client.login()
    file = tmp_path / "types.yaml"
    file.write_text(
        "agent_types:\n  - {name: Piped, slug: piped, kind: llm, primary_model: mock}\n", encoding="utf-8"
    )

    code, out, err = await run_agentmesh(
        "apply", "-f", str(file), "--registry", mesh.gateway.address, env={"AGENTMESH_TOKEN": token}
    )
    assert (code, err) == (0, DEPRECATED), err
    assert out.endswith("1 created, 0 updated, 0 unchanged\n")

    code, out, err = await run_agentmesh(
        "apply",
        "-f",
        str(file),
        env={"AGENTMESH_TOKEN": token, "AGENTMESH_REGISTRY_ADDRESS": mesh.gateway.address},
    )
    assert (code, err) == (0, DEPRECATED), err
    assert out.endswith("0 created, 0 updated, 1 unchanged\n")

    code, out, err = await run_agentmesh(
        *("users", "create", "--email", "piped@example.com", "--password", "a long password"),
        env={"AGENTMESH_TOKEN": token, "AGENTMESH_REGISTRY_ADDRESS": mesh.gateway.address},
    )
    assert (code, err) == (0, DEPRECATED), err
    assert out.startswith("created user piped@example.com")

    code, out, _ = await run_agentmesh("apply", "--help", env={})
    assert "--gateway" in out and "--registry" not in out
