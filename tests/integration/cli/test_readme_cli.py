"""The README's CLI examples run as they are written, in order, each as the command a user types,
against an in-process mesh signed in as its superuser: declaring agents and reading them back,
requests for input, project limits, agent versions, forking a session, API keys and webhooks. Only
`$SID` (a session the demo made) and the ids the examples name by placeholder are the test's own;
a command that fails, or an example that changes shape, fails here."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
from google.protobuf import field_mask_pb2

from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import invoke
from tests.integration.gateway.support import Api
from tests.mesh import MeshClient, bearer
from tests.readme import readme_blocks, shell_commands


async def _run(commands: list[list[str]], env: dict[str, str | None]) -> list[str]:
    """Runs each `agentmesh …` command; their outputs."""
    outputs = []
    for command in commands:
        assert command[0] == "agentmesh", command
        ran = await invoke(app, command[1:], env=env)
        assert ran.exit_code == 0, f"{' '.join(command)}:\n{ran.output}"
        outputs.append(ran.output)
    return outputs


_CLOCK = {"content": "", "tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}
_ASKS = {"content": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": "Which city?"}}]}


async def _waiting_requests(mesh: Mesh, token: str, kinds: list[str]) -> list[str]:
    """A run of the demo project waiting for a request of each kind (`question`, `approval`), each
    in a session of its own: their requests' ids."""
    async with httpx.AsyncClient(base_url=mesh.gateway.http.url, timeout=60) as http:
        api, headers = Api(http), {"Authorization": f"Bearer {token}"}
        demo = next(
            p
            for p in (await http.get("/api/v1/projects", headers=headers)).json()["data"]
            if p["slug"] == "demo"
        )
        asking = {
            "question": ({"tools": ["ask_user"]}, [_ASKS, "Lisbon it is."]),
            "approval": (
                {"tools": ["get_current_time"], "tool_permissions": {"get_current_time": "ask"}},
                [_CLOCK, "It is late."],
            ),
        }
        for kind, (type_fields, mock_responses) in asking.items():
            agent_type = await api.agent_type(**type_fields)
            body = {
                "agent_type_id": agent_type["id"],
                "name": f"readme-{kind}",
                "config": {"mock_responses": mock_responses},
            }
            spawned = await http.post(f"/api/v1/projects/{demo['id']}/agents", json=body, headers=headers)
            assert spawned.status_code == 201, spawned.text
        ids = []
        for kind in kinds:
            session_id = f"readme-{uuid.uuid4().hex}"
            chat = {
                "model": f"demo/readme-{kind}",
                "session_id": session_id,
                "messages": [{"role": "user", "content": "go"}],
            }
            asked = await http.post("/v1/chat/completions", json=chat, headers=headers)
            assert asked.status_code == 200, asked.text
            found = await http.get(
                f"/api/v1/projects/{demo['id']}/input-requests",
                params={"session_id": session_id},
                headers=headers,
            )
            [request] = found.json()["data"]
            assert request["kind"] == kind, request
            ids.append(str(request["id"]))
        return ids


async def test_the_readmes_cli_examples_run(mesh: Mesh, client: MeshClient, tmp_path: Path) -> None:
    token = await client.login()
    env: dict[str, str | None] = {
        "AGENTMESH_TOKEN": token,
        "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address,
        "AGENTMESH_EMAIL": None,
        "AGENTMESH_PASSWORD": None,
        "AGENTMESH_REGISTRY_ADDRESS": None,
        "AGENTMESH_CONFIG_DIR": str(tmp_path),  # no login of the machine's user is read
    }
    declare, read = readme_blocks("### Declare agents", "sh")[:2]
    applied, demo = await _run(shell_commands(declare), env)
    assert "created" in applied and "42" in demo
    # Reading them back; terminating the worker comes last, as the README says.
    *reads, terminate = shell_commands(read)
    assert terminate[:3] == ["agentmesh", "delete", "agent"]
    *_, sessions = await _run(reads, env)
    variables = {"SID": json.loads(sessions)[0]["id"]}

    [limits] = readme_blocks("### Project limits", "sh")
    _, shown = await _run(shell_commands(limits), env)
    assert "concurrent_runs: 8" in shown

    # An agent edited once, as the versions example has it (a diff of version 2 against 1).
    metadata = bearer(token)
    project = (
        await client.registry.GetProject(reg.GetProjectRequest(slug="demo"), metadata=metadata)
    ).project
    found = await client.registry.GetAgent(
        reg.GetAgentRequest(project_id=project.id, id="coordinator"), metadata=metadata
    )
    edit = resources_pb2.Agent(id=found.agent.id, project_id=project.id)
    edit.config.max_steps = 3
    edited = reg.UpdateAgentRequest(
        agent=edit, update_mask=field_mask_pb2.FieldMask(paths=["config.max_steps"])
    )
    await client.registry.UpdateAgent(edited, metadata=metadata)
    [versions] = readme_blocks("### Agent versions", "sh")
    _, diff, *_ = await _run(shell_commands(versions, variables), env)
    assert "max_steps" in diff

    [fork] = readme_blocks("### Fork a session", "sh")
    await _run(shell_commands(fork, variables), env)

    # Requests for input: each command on a request of the kind its placeholder stands for.
    [_, _, waiting] = readme_blocks("### Declare agents", "sh")
    listing, *responses = shell_commands(waiting)
    kinds = [("question" if "1e70ed47-…" in command else "approval") for command in responses]
    ids = await _waiting_requests(mesh, token, kinds)
    [listed] = await _run([listing], env)
    assert all(request_id in listed for request_id in ids), listed
    await _run(
        [
            [word.replace("1e70ed47-…", request_id).replace("5c0b…", request_id) for word in command]
            for command, request_id in zip(responses, ids, strict=True)
        ],
        env,
    )

    # API keys: the one created is the one listed and revoked (its id, as the example's
    # placeholder says).
    [keys] = readme_blocks("### API keys", "sh")
    create_key, *rest = shell_commands(keys)
    [created] = await _run([create_key], env)
    key_id = re.search(r"API key (\S+) \(ci\) created", created)
    assert key_id and "amk_" in created, created
    listed, revoked = await _run([[word.replace("ID_OR_PREFIX", key_id[1]) for word in c] for c in rest], env)
    assert key_id[1] in listed and "revoked" in revoked

    # Webhooks: created, tested (a delivery queued, whether example.com answers or not) and its
    # deliveries listed.
    [hooks] = readme_blocks("### Webhooks", "sh")
    create_hook, *rest = shell_commands(hooks)
    [made] = await _run([create_hook], env)
    hook_id = re.search(r"webhook (\S+) created", made)
    assert hook_id and "whsec_" in made, made
    tested, deliveries = await _run(
        [[word.replace("WEBHOOK_ID", hook_id[1]) for word in c] for c in rest], env
    )
    delivery = re.search(r"delivery (\S+)", tested)
    assert delivery and delivery[1] in deliveries and "webhook.test" in deliveries, deliveries

    await _run([terminate], env)
