"""`agentmesh chat`: a chat streamed live through the gateway, in one session per invocation."""

from __future__ import annotations

from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from tests.integration.cli.support import invoke
from tests.mesh import MeshClient


async def test_chat_streams_steps_and_prints_the_answer(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, mock_responses=["hello from the chat command"])

    result = await invoke(
        app, ["chat", seeded.ref, "hi there", "--gateway", mesh.gateway.address, "--token", token]
    )

    assert result.exit_code == 0, result.output
    assert "you: hi there" in result.output
    assert f"{seeded.ref}: hello from the chat command" in result.output
    assert "answered in 1 step(s)" in result.output
    assert "agentmesh trace" in result.output


async def test_chat_reads_messages_from_input_in_one_session(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token)  # the echo model

    result = await invoke(
        app,
        ["chat", seeded.ref, "--gateway", mesh.gateway.address, "--token", token],
        input="first line\n\nsecond line\n",
    )

    assert result.exit_code == 0, result.output
    assert f"{seeded.ref}: first line" in result.output
    assert f"{seeded.ref}: second line" in result.output
    assert result.output.count("session ") == 1


async def test_chat_with_an_unknown_agent_fails_with_a_clear_message(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    result = await invoke(
        app, ["chat", "nope/nobody", "hi", "--gateway", mesh.gateway.address, "--token", token]
    )
    assert result.exit_code == 1
    assert "the chat failed" in result.output


async def test_chat_names_the_agent_by_its_slug_or_its_name(mesh: Mesh, client: MeshClient) -> None:
    token = await client.login()
    seeded = await client.seed_agent(token, name="Greeter Bot", mock_responses=["hello, people"])
    assert seeded.agent_name == "Greeter Bot"

    for agent in (f"{seeded.project_slug}/Greeter Bot", f"{seeded.project_slug}/greeter-bot"):
        result = await invoke(app, ["chat", agent, "hi", "--gateway", mesh.gateway.address, "--token", token])
        assert result.exit_code == 0, result.output
        assert f"{agent}: hello, people" in result.output
