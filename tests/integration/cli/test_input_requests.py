"""A person in the loop at the CLI: `agentmesh chat` with an agent that asks (`ask_user`), piped
(it prints the question and how to answer it, and exits 3) and on a terminal (it asks at once,
answers, and follows the resumed run, as often as the run asks); `agentmesh requests` lists what
waits; `agentmesh approve | deny | answer` respond and follow the run, refusing a second response
by naming who gave the first. Each command runs as its own process, as a user runs it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentmesh.cli.mesh import Mesh
from agentmesh.common.v1 import run_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.bearer import service_channel, system_metadata
from tests.integration.cli.support import CTRL_D, Terminal, agentmesh
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, MeshClient, Seeded, bearer
from tests.polling import eventually

QUESTION = "Which city should I book?"


def ask(question: str = QUESTION) -> dict:
    return {"content": "", "tool_calls": [{"name": "ask_user", "arguments": {"question": question}}]}


async def asking_agent(client: MeshClient, *then: object) -> Seeded:
    token = await client.login()
    return await client.seed_agent(token, tools=["ask_user"], mock_responses=[ask(), *(then or ["Booked."])])


async def test_a_piped_chat_says_what_the_run_asks_and_the_commands_answer_it(
    mesh: Mesh, client: MeshClient
) -> None:
    seeded = await asking_agent(client)
    env = {"AGENTMESH_TOKEN": seeded.token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}

    code, out, err = await agentmesh("chat", seeded.ref, "Book me a trip.", env=env)
    assert (code, err) == (3, ""), out + err
    (request,) = await _pending(client, seeded)
    assert f"{seeded.agent_name} asks a person: {QUESTION}" in out
    assert f"{seeded.agent_name} waits for a person (1 request)" in out
    assert f"{seeded.agent_name} asks (question): {QUESTION}\n  request {request.id}, until " in out
    assert f"    agentmesh answer {request.id} TEXT --project {seeded.project_slug}\n" in out

    code, out, err = await agentmesh("requests", seeded.project_slug, env=env)
    assert (code, err) == (0, ""), err
    header, row = out.splitlines()
    assert header.split() == ["ID", "KIND", "AGENT", "ASKS", "AGE", "EXPIRES"]
    assert row.startswith(f"{request.id}  question  {seeded.agent_name}  {QUESTION}  ")
    assert row.endswith(" ago  in 23h") or row.endswith(" ago  in 1d"), row
    code, out, _ = await agentmesh("requests", seeded.project_slug, "-o", "json", env=env)
    listed = json.loads(out)
    assert [(r["id"], r["kind"], r["state"], r["question"]) for r in listed] == [
        (request.id, "question", "pending", QUESTION)
    ]

    # Its id alone finds it: the project is looked for among the caller's.
    code, out, err = await agentmesh("answer", request.id, "Lisbon", env=env)
    assert (code, err) == (0, ""), out + err
    assert f"{seeded.agent_name} asks (question): {QUESTION}\n" in out
    assert f"{seeded.agent_name} ask_user → Lisbon\n" in out
    assert f"{seeded.project_slug}/{seeded.agent_name}: Booked.\n" in out
    assert f"agentmesh trace {request.session_id} --project {seeded.project_slug}" in out
    assert await _pending(client, seeded) == []

    code, out, err = await agentmesh("answer", request.id, "Porto", env=env)
    assert code == 1
    assert err.startswith(f"error: request {request.id!r} was already answered by {SUPERUSER_EMAIL} at ")
    code, out, _ = await agentmesh("requests", seeded.project_slug, "--state", "answered", env=env)
    assert out.splitlines()[1].endswith(f"answered 'Lisbon' by {SUPERUSER_EMAIL}")

    cases = {
        ("answer", "nope", "x"): "error: no request for input 'nope' that you may see\n",
        ("approve", "nope", "-p", seeded.project_slug): (
            f"error: no request for input 'nope' in project '{seeded.project_slug}' that you may see\n"
        ),
        ("approve", request.id): (
            f"error: request '{request.id}' is a question: answer it with `agentmesh answer ID TEXT`,"
            " or decline it with `agentmesh deny ID`\n"
        ),
        ("requests", "nope"): "error: no project 'nope' that you may see\n",
    }
    for args, expected in cases.items():
        code, _, err = await agentmesh(*args, env=env)
        assert (code, err) == (1, expected), args


async def test_on_a_terminal_the_chat_asks_as_often_as_the_run_does(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    seeded = await asking_agent(client, ask("And which hotel?"), "Booked twice.")
    env = {"AGENTMESH_CONFIG_DIR": str(tmp_path), "AGENTMESH_TOKEN": seeded.token}

    terminal = Terminal("chat", seeded.ref, "Book me a trip.", "--gateway", mesh.gateway.address, env=env)
    await terminal.start()
    await terminal.shows(f"asks (question): {QUESTION}")
    await terminal.shows("answer> ")
    terminal.type(b"Lisbon\n")
    await terminal.shows("asks (question): And which hotel?")
    await terminal.shows("answer> ", times=2)
    terminal.type(b"The one by the river\n")
    await terminal.shows(f"{seeded.ref}: Booked twice.")
    assert await terminal.exit_code() == 0, terminal.text
    assert "ask_user → The one by the river" in terminal.text
    assert await _pending(client, seeded) == []


async def test_a_person_who_leaves_the_question_is_told_how_to_answer_it_later(
    mesh: Mesh, client: MeshClient, tmp_path: Path
) -> None:
    seeded = await asking_agent(client)
    env = {"AGENTMESH_CONFIG_DIR": str(tmp_path), "AGENTMESH_TOKEN": seeded.token}

    terminal = Terminal("chat", seeded.ref, "Book me a trip.", "--gateway", mesh.gateway.address, env=env)
    await terminal.start()
    await terminal.shows("answer> ")
    terminal.type(CTRL_D)
    assert await terminal.exit_code() == 3, terminal.text
    (request,) = await _pending(client, seeded)
    assert f"agentmesh answer {request.id} TEXT --project {seeded.project_slug}" in terminal.text


async def test_approve_and_deny_respond_once_and_follow_the_run(mesh: Mesh, client: MeshClient) -> None:
    seeded = await asking_agent(client)
    approval, question = await _suspend_for_approval_and_question(mesh, seeded)
    env = {"AGENTMESH_TOKEN": seeded.token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}

    code, out, err = await agentmesh("requests", seeded.project_slug, env=env)
    rows = out.splitlines()[1:]
    assert [row.split()[:2] for row in rows] == [[approval, "approval"], [question, "question"]]
    assert 'delete_file {"path": "/tmp/x"}' in rows[0]

    code, out, err = await agentmesh("approve", approval, "--arguments", "[1]", env=env)
    assert code == 2 and "must be a JSON object" in err
    code, out, err = await agentmesh(
        "approve", approval, "--reason", "fine", "--arguments", '{"path": "/tmp/y"}', env=env
    )
    # The run still waits for its question: the command says so, and how to answer it.
    assert (code, err) == (3, ""), out + err
    assert f'{seeded.agent_name} asks (approval): may it run delete_file {{"path": "/tmp/x"}}?' in out
    assert f"asks (question): Which folder?\n  request {question}, until " in out
    assert f"agentmesh answer {question} TEXT --project {seeded.project_slug}" in out

    code, out, err = await agentmesh("deny", approval, "-p", seeded.project_slug, env=env)
    assert code == 1
    assert f"was already answered by {SUPERUSER_EMAIL}" in err
    code, out, _ = await agentmesh("requests", seeded.project_slug, "--state", "answered", env=env)
    assert out.splitlines()[1].endswith(f"approved by {SUPERUSER_EMAIL} (fine)")


async def _idle(client: MeshClient, seeded: Seeded) -> bool:
    got = await client.registry.GetAgent(
        reg.GetAgentRequest(project_id=seeded.project_id, id=seeded.agent_id), metadata=bearer(seeded.token)
    )
    return got.agent.status == resources_pb2.AGENT_STATUS_IDLE


async def _pending(client: MeshClient, seeded: Seeded) -> list[run_pb2.InputRequest]:
    listed = await client.registry.ListInputRequests(
        reg.ListInputRequestsRequest(project_id=seeded.project_id), metadata=bearer(seeded.token)
    )
    return list(listed.input_requests)


async def _suspend_for_approval_and_question(mesh: Mesh, seeded: Seeded) -> tuple[str, str]:
    """A run of the agent parked as an executor parks one that waits for an approval and an
    answer (no agent asks for approvals yet): the two requests' ids."""
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    approval = run_pb2.InputRequest(
        id=f"{run_id}-a", kind=run_pb2.INPUT_KIND_APPROVAL, tool="delete_file", call_id="call-1"
    )
    approval.arguments.update({"path": "/tmp/x"})
    question = run_pb2.InputRequest(
        id=f"{run_id}-q", kind=run_pb2.INPUT_KIND_QUESTION, question="Which folder?", call_id="call-2"
    )
    for offset, request in enumerate((approval, question)):
        request.created_at.FromDatetime(now + timedelta(milliseconds=offset))
        request.expires_at.FromDatetime(now + timedelta(hours=1))
    async with service_channel(mesh.services["registry"].address, JWT_SECRET) as channel:
        registry, system = RegistryClient(channel), system_metadata()
        await registry.start_agent_run(
            seeded.agent_id, run_id, session_id=f"s-{run_id}", executor_id="exec-x", metadata=system
        )
        await registry.suspend_run(
            seeded.agent_id, run_id, executor_id="exec-x", requests=[approval, question], metadata=system
        )
    return approval.id, question.id


async def test_deny_declines_a_question_and_the_model_is_told(mesh: Mesh, client: MeshClient) -> None:
    seeded = await asking_agent(client, "I will pick a city myself.")
    env = {"AGENTMESH_TOKEN": seeded.token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}
    code, out, err = await agentmesh("chat", seeded.ref, "Book me a trip.", env=env)
    assert code == 3, out + err
    (request,) = await _pending(client, seeded)
    assert f"    agentmesh deny {request.id} --project {seeded.project_slug} [--reason R]" in out

    code, out, err = await agentmesh("deny", request.id, "--reason", "not telling", env=env)
    assert (code, err) == (0, ""), out + err
    told = f"ask_user: no answer: {SUPERUSER_EMAIL} declined to answer: not telling"
    assert f"{seeded.agent_name} ask_user → {told}" in out
    assert f"{seeded.project_slug}/{seeded.agent_name}: I will pick a city myself.\n" in out
    code, out, _ = await agentmesh("requests", seeded.project_slug, "--state", "answered", env=env)
    assert out.splitlines()[1].endswith(f"declined by {SUPERUSER_EMAIL} (not telling)")


async def test_cancel_ends_the_waiting_run_and_the_session_goes_on(mesh: Mesh, client: MeshClient) -> None:
    seeded = await asking_agent(client)
    env = {"AGENTMESH_TOKEN": seeded.token, "AGENTMESH_GATEWAY_ADDRESS": mesh.gateway.address}
    session = uuid.uuid4().hex
    code, out, err = await agentmesh("chat", seeded.ref, "Book me a trip.", "--session", session, env=env)
    assert code == 3, out + err
    (request,) = await _pending(client, seeded)

    code, out, err = await agentmesh("cancel", request.id, "--reason", "plans changed", env=env)
    assert (code, err) == (0, ""), out + err
    assert out == f"cancelled the run waiting for {request.id}: {request.run_id}\n"
    code, out, err = await agentmesh("answer", request.id, "Lisbon", env=env)
    assert code == 1 and "cancelled" in err, out + err
    code, out, _ = await agentmesh("requests", seeded.project_slug, "--state", "cancelled", env=env)
    assert out.splitlines()[1].endswith(f"run cancelled by {SUPERUSER_EMAIL} (plans changed)"), out
    # Once its end is recorded, the session takes the next message (the script asks again).
    await eventually(lambda: _idle(client, seeded), what="the agent idle again")
    code, out, err = await agentmesh("chat", seeded.ref, "Again.", "--session", session, env=env)
    assert code == 3, out + err
