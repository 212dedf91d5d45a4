"""The README's curl examples run as the HTTP requests they are, against the package's mesh: the
method, headers, body and path as written; only the address and the `$NAME` variables (a token,
a project's or agent type's id) are the test's own. An example whose route, field or body went
stale fails here."""

from __future__ import annotations

import uuid
from string import Template
from typing import Any

import httpx

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Agent, Api
from tests.readme import readme_blocks, shell_commands

_EXAMPLE_ADDRESSES = ("http://127.0.0.1:8080", "localhost:8080")


def curl_request(words: list[str], base_url: str) -> dict[str, Any]:
    """A curl command (`-X`, `-H`, `-d`, `-s`) as httpx.request's arguments."""
    assert words[0] == "curl", words
    request: dict[str, Any] = {"method": "", "headers": {}}
    rest = iter(words[1:])
    for word in rest:
        if word == "-X":
            request["method"] = next(rest)
        elif word == "-H":
            name, _, value = next(rest).partition(":")
            request["headers"][name.strip()] = value.strip()
        elif word == "-d":
            request["content"] = next(rest)
        elif word == "-s":
            continue
        else:
            assert word.startswith(_EXAMPLE_ADDRESSES), f"curl: {word!r} is not understood here"
            for address in _EXAMPLE_ADDRESSES:
                word = word.replace(address, base_url)
            request["url"] = word
    request["method"] = request["method"] or ("POST" if "content" in request else "GET")
    return request


_CLOCK = {"content": "", "tool_calls": [{"name": "get_current_time", "arguments": {"timezone": "UTC"}}]}


def _with(words: list[str], **variables: str) -> list[str]:
    """A command's words with the `$NAME` variables only the test's own steps tell."""
    return [Template(word).safe_substitute(variables) for word in words]


async def _waiting(http: httpx.AsyncClient, agent: Agent) -> str:
    """Has the agent ask for an approval in a new session; the request's id."""
    session_id = f"readme-{uuid.uuid4().hex}"
    chat = {
        "model": agent.model,
        "session_id": session_id,
        "messages": [{"role": "user", "content": "time?"}],
    }
    asked = await http.post("/v1/chat/completions", json=chat, headers=agent.owner.headers)
    assert asked.status_code == 200, asked.text
    listed = await http.get(
        f"/api/v1/projects/{agent.project_id}/input-requests",
        params={"session_id": session_id},
        headers=agent.owner.headers,
    )
    [request] = listed.json()["data"]
    return str(request["id"])


async def _run(http: httpx.AsyncClient, base_url: str, commands: list[list[str]]) -> list[httpx.Response]:
    """Sends each curl command's request; their answers, each a success."""
    answers = []
    for words in commands:
        answer = await http.request(**curl_request(words, base_url))
        assert answer.is_success, f"{' '.join(words)}: {answer.status_code} {answer.text}"
        answers.append(answer)
    return answers


async def test_the_readmes_curl_examples_run(
    mesh: Mesh, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    admin = await api.admin()
    # An agent that asks before it reads the clock: each of its runs waits for an approval.
    agent = await api.agent(
        mock_responses=[_CLOCK, "It is late."],
        type_fields={"tools": ["get_current_time"], "tool_permissions": {"get_current_time": "ask"}},
    )
    base_url = mesh.gateway.http.url
    variables = {"TOKEN": agent.owner.token, "PID": agent.project_id}

    # A person in the loop: the requests a project's runs wait for (none yet), one approved, and
    # another's run cancelled instead.
    [person] = readme_blocks("### A person in the loop", "sh")
    listing, respond, cancel = shell_commands(person, variables)
    [listed] = await _run(http, base_url, [listing])
    assert listed.json()["data"] == []
    approved, cancelled = await _waiting(http, agent), await _waiting(http, agent)
    [answered] = await _run(http, base_url, [_with(respond, RID=approved)])
    assert answered.json()["response"]["decision"] == "approve"
    [ended] = await _run(http, base_url, [_with(cancel, RID=cancelled)])
    assert ended.json()["input_request"]["state"] == "cancelled"
    [pending] = await _run(http, base_url, [listing])
    assert pending.json()["data"] == []

    # A superuser's: delegation limits of an agent type, and a registered MCP server.
    admin_variables = {"TOKEN": admin.token, "TYPE": (await api.agent_type())["id"]}
    [limits] = readme_blocks("### Bounded delegation trees and reads", "sh")
    [patched] = await _run(http, base_url, shell_commands(limits, admin_variables))
    assert patched.json()["delegation_limits"]["max_per_chat"] == 20
    [servers] = readme_blocks("### MCP servers", "sh")
    [created] = await _run(http, base_url, shell_commands(servers, admin_variables))
    assert created.json()["headers"] == {"Authorization": "********"}
