"""A project's agents as an MCP server, driven by the official MCP Python SDK's client over
streamable HTTP, on the 2026-07-28 revision (the client's default: discovery, no handshake) and
on the handshake revision: the tools are the project's agents and no one else's, a call is the
agent's answer with its session, the session goes on, the run's steps come as progress, a failed
run is an error result, a run waiting for a person says so and takes the answer, and the
credentials are those of every other face. The wire does not depend on the database: SQLite only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp
import mcp_types
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api, asking_agent, suffix
from tests.integration.gateway.test_run_failed_status import _failing_pipeline


@asynccontextmanager
async def connected(
    mesh: Mesh, path: str, credential: str, mode: str = "auto", **options: Any
) -> AsyncIterator[mcp.Client]:
    headers = {"Authorization": f"Bearer {credential}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{mesh.gateway.http.url}{path}", http_client=http)
        async with mcp.Client(transport, mode=mode, cache=None, **options) as client:
            yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_agents_are_tools_answering_in_sessions_with_progress(
    mesh: Mesh, api: Api, once: None, mode: str
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    # No script: the mock model answers with the message it was given.
    first = await api.agent(owner, name="Alpha", project=project, mock_responses=[])
    await api.agent(owner, name="beta", project=project, mock_responses=["unused"])
    await api.agent(name="someone-elses", mock_responses=["private"])

    async with connected(mesh, f"/mcp/projects/{first.project_id}", owner.token, mode) as client:
        tools = (await client.list_tools()).tools
        assert sorted(tool.name for tool in tools) == ["alpha", "beta"]
        alpha = next(tool for tool in tools if tool.name == "alpha")
        assert alpha.title == "Alpha" and alpha.description == "a test agent"
        assert alpha.input_schema["required"] == ["message"]

        progress: list[tuple[float, str | None]] = []

        async def seen(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, message))

        answer = await client.call_tool("alpha", {"message": "hello"}, progress_callback=seen)
        assert not answer.is_error
        assert [block.text for block in answer.content] == ["hello"]
        session_id = answer.structured_content["session_id"]
        assert answer.structured_content["status"] == "completed"
        assert progress and progress[0] == (1, "alpha: step 1"), progress

        again = await client.call_tool("alpha", {"message": "and?", "session_id": session_id})
        assert [block.text for block in again.content] == ["and?"]
        assert again.structured_content["session_id"] == session_id
    events = await api.session_events(first, session_id)
    assert [e["content"] for e in events if e["event_type"] == "user_message"] == ["hello", "and?"]


async def test_a_failed_run_is_an_error_result_and_an_unknown_tool_a_protocol_error(
    mesh: Mesh, api: Api, once: None
) -> None:
    pipeline = await _failing_pipeline(api)
    async with connected(mesh, f"/mcp/projects/{pipeline.project_id}", pipeline.owner.token) as client:
        failed = await client.call_tool("pipeline", {"message": "go"})
        assert failed.is_error and "sleeper" in failed.content[0].text
        assert failed.structured_content == {"status": "failed", "reason": "SUB_AGENT_FAILED"}
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("nobody", {"message": "go"})


async def test_a_run_waiting_for_input_says_so_and_takes_the_answer(mesh: Mesh, api: Api, once: None) -> None:
    agent = await asking_agent(api, "Which city?", "Lisbon it is")
    # A client that cannot ask its user is told what the run asks, and answers with another call.
    async with connected(mesh, f"/mcp/projects/{agent.project_id}", agent.owner.token) as client:
        asked = await client.call_tool("assistant", {"message": "book a trip"})
        assert not asked.is_error and "Which city?" in asked.content[0].text
        waiting = asked.structured_content
        assert waiting["status"] == "input_required"
        asked_for = [(r["kind"], r["question"]) for r in waiting["input_requests"]]
        assert asked_for == [("question", "Which city?")]
        answered = await client.call_tool(
            "assistant", {"message": "Lisbon", "session_id": waiting["session_id"]}
        )
        assert [block.text for block in answered.content] == ["Lisbon it is"]


async def test_the_credentials_of_every_face(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=["by key"])
    other = await api.agent(mock_responses=["not yours"])
    path = f"/mcp/projects/{agent.project_id}"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    assert (await http.post(path, json=ping, headers=accept)).status_code == 401
    foreign = await http.post(
        f"/mcp/projects/{other.project_id}", json=ping, headers={**accept, **agent.owner.headers}
    )
    assert foreign.status_code == 404, foreign.text
    # A key scoped to the project reaches it at /mcp, and no other project anywhere.
    created = await http.post(
        "/api/v1/api-keys",
        json={"name": f"mcp-{suffix()}", "project_id": agent.project_id},
        headers=agent.owner.headers,
    )
    key = created.json()["key"]
    async with connected(mesh, "/mcp", key) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["assistant"]
        answer = await client.call_tool("assistant", {"message": "hi"})
        assert answer.content[0].text == "by key"
    scoped_elsewhere = await http.post(
        f"/mcp/projects/{other.project_id}", json=ping, headers={**accept, "Authorization": f"Bearer {key}"}
    )
    assert scoped_elsewhere.status_code == 404
    unscoped = await http.post("/mcp", json=ping, headers={**accept, **agent.owner.headers})
    assert unscoped.status_code == 422 and "/mcp/projects/" in unscoped.text


async def test_a_client_that_asks_its_user_answers_a_waiting_run_in_the_same_call(
    mesh: Mesh, api: Api, once: None
) -> None:
    agent = await asking_agent(api, "Which city?", "Lisbon it is")
    asked: list[str] = []

    async def ask_the_user(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"answer": "Porto"})

    path = f"/mcp/projects/{agent.project_id}"
    async with connected(mesh, path, agent.owner.token, elicitation_callback=ask_the_user) as client:
        answer = await client.call_tool("assistant", {"message": "book a trip"})
    assert [block.text for block in answer.content] == ["Lisbon it is"]
    assert len(asked) == 1 and "Which city?" in asked[0]
    events = await api.session_events(agent, answer.structured_content["session_id"])
    received = [e for e in events if e["event_type"] == "input_received"]
    assert len(received) == 1 and "Porto" in str(received[0]), received
