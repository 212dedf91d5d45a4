"""Discovery without a credential: an agent its owner published has a public card that a2a-sdk's
card resolver fetches with none, and a client built from that card talks to the agent (with a
credential); an unpublished agent answers 404 exactly as one that does not exist; the gateway's
well-known card and AI Catalog list the published agents of every project, and only those (the
one test whose answer comes from the database's query, so the one run on both databases)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.client.errors import AgentCardResolutionError
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf.json_format import MessageToDict

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.a2a_client import BINDINGS, a2a_client, send_request
from tests.integration.gateway.support import Agent, Api

CARD = "/.well-known/agent-card.json"


async def _publish(api: Api, agent: Agent, public: bool = True) -> None:
    response = await api.http.patch(agent.path, json={"public": public}, headers=agent.owner.headers)
    assert response.status_code == 200, response.text
    assert response.json()["public"] is public


async def test_a_published_agents_card_needs_no_credential_and_its_client_talks_to_it(
    api: Api, mesh: Mesh, once: None
) -> None:
    agent = await api.agent(mock_responses=["hello"], network_access=[])
    await _publish(api, agent)
    async with httpx.AsyncClient(timeout=30) as anonymous:
        card = await A2ACardResolver(anonymous, mesh.gateway.http.url + agent.base).get_agent_card()

    assert card.name == agent.name
    assert card.capabilities.extended_agent_card
    # What the owner did not publish stays behind the extended card: tools, delegation.
    assert {skill.id for skill in card.skills}.isdisjoint({"tool_calling", "task_delegation"})
    assert set(card.security_schemes) == {"bearer", "apiKey"}
    urls = {i.protocol_binding: i for i in card.supported_interfaces}
    assert urls["JSONRPC"].url == f"{mesh.gateway.http.url}{agent.base}/a2a/jsonrpc"
    assert urls["HTTP+JSON"].url == f"{mesh.gateway.http.url}{agent.base}/a2a/rest"
    assert urls["GRPC"].url == mesh.gateway.address  # host:port, A2A's form for gRPC
    assert urls["GRPC"].tenant == f"{agent.project_slug}/{agent.name}"

    for binding in BINDINGS:  # each message a new task in a new session
        async with a2a_client(card, binding, agent.owner.token, streaming=False) as client:
            events = [event async for event in client.send_message(send_request("hi"))]
        task = events[-1].task
        assert task.status.state == a2a_pb2.TaskState.TASK_STATE_COMPLETED, binding
        assert task.artifacts[0].parts[0].text == "hello"
        # The card is public; the agent and its extended card are not.
        async with a2a_client(card, binding, "", streaming=False) as client:
            with pytest.raises((A2AClientError, a2a_errors.A2AError)):
                await client.get_extended_agent_card(a2a_pb2.GetExtendedAgentCardRequest())
            with pytest.raises((A2AClientError, a2a_errors.A2AError)):
                [_ async for _ in client.send_message(send_request("hi"))]


async def test_a_private_and_an_unknown_agent_answer_alike_without_a_credential(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    private = await api.agent(mock_responses=["hi"])
    others = [
        f"/agents/{private.project_slug}/nobody",  # no such agent in a project that exists
        "/agents/no-such-project/assistant",
    ]
    answers = [await http.get(path + CARD) for path in [private.base, *others]]
    assert {answer.status_code for answer in answers} == {404}
    assert len({(answer.content, answer.headers.get("content-type")) for answer in answers}) == 1

    # Its owner still reads it, and the resolver without a credential is refused.
    owned = await http.get(private.base + CARD, headers=private.owner.headers)
    assert owned.status_code == 200 and owned.json()["name"] == private.name
    stranger = await api.user()
    refused = await http.get(private.base + CARD, headers=stranger.headers)
    assert (refused.status_code, refused.content) == (404, answers[0].content)
    with pytest.raises(AgentCardResolutionError) as failed:
        await A2ACardResolver(http, str(http.base_url) + private.base).get_agent_card()
    assert failed.value.status_code == 404

    # Published, then unpublished: the card comes and goes with the flag.
    await _publish(api, private)
    assert (await http.get(private.base + CARD)).status_code == 200
    await _publish(api, private, public=False)
    assert (await http.get(private.base + CARD)).content == answers[0].content


async def test_the_gateway_index_lists_the_published_agents_of_every_project(
    api: Api, http: httpx.AsyncClient, mesh: Mesh
) -> None:
    shown = [await api.agent(mock_responses=["hi"]) for _ in range(2)]  # two owners, two projects
    hidden = await api.agent(shown[0].owner, name="hidden", mock_responses=["hi"])
    for agent in shown:
        await _publish(api, agent)
    ids = {f"{agent.project_slug}/{agent.name}" for agent in shown}

    async with httpx.AsyncClient(base_url=mesh.gateway.http.url, timeout=30) as anonymous:
        gateway = await A2ACardResolver(anonymous, mesh.gateway.http.url).get_agent_card()
        catalog_response = await anonymous.get("/.well-known/ai-catalog.json")
        skills = {skill.id for skill in gateway.skills}
        assert ids <= skills
        assert f"{hidden.project_slug}/{hidden.name}" not in skills
        assert not gateway.supported_interfaces  # the gateway answers no messages itself

        assert catalog_response.status_code == 200
        assert catalog_response.headers["content-type"].startswith("application/ai-catalog+json")
        catalog: dict[str, Any] = catalog_response.json()
        extension = MessageToDict(gateway.capabilities.extensions[0].params)
        assert extension == catalog
        assert catalog["specVersion"]
        entries = {entry["url"]: entry for entry in catalog["entries"]}
        cards = {f"{mesh.gateway.http.url}{agent.base}{CARD}" for agent in shown}
        assert cards <= set(entries)
        assert f"{mesh.gateway.http.url}{hidden.base}{CARD}" not in entries
        for url in cards:
            assert entries[url]["mediaType"] == "application/a2a-agent-card+json"
            assert (await anonymous.get(url)).status_code == 200
