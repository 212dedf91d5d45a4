"""LangChain's OpenAI chat model against the OpenAI-compatible face, as its users write it: a system
message reaches the agent's model, `with_structured_output` (JSON schema) returns the parsed object,
and what the face cannot honour yet — client-side tools — is refused with OpenAI's 400 instead of
answering as if no tool had been offered."""

from __future__ import annotations

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Agent, Api
from tests.integration.gateway.test_openai import TIMEOUT_SECONDS


class Trip(BaseModel):
    city: str
    nights: int


@tool
def book(city: str) -> str:
    """Books a trip to a city."""
    return f"booked {city}"


def chat_model(mesh: Mesh, agent: Agent) -> ChatOpenAI:
    return ChatOpenAI(
        model=agent.model,
        base_url=f"{mesh.gateway.http.url}/v1",
        api_key=agent.owner.token,  # type: ignore[arg-type]
        max_retries=0,
        timeout=TIMEOUT_SECONDS,
    )


async def test_the_system_message_and_turns_reach_the_model(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[{"echo_prompt": True}])
    reply = await chat_model(mesh, agent).ainvoke([SystemMessage("Answer in French."), HumanMessage("Hi")])
    assert reply.content == "system: Answer in French.\nuser: Hi"


async def test_structured_output_returns_the_parsed_object(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=['{"city": "Lisbon", "nights": 3}'])
    structured = chat_model(mesh, agent).with_structured_output(Trip, method="json_schema")
    assert await structured.ainvoke("Plan my trip.") == Trip(city="Lisbon", nights=3)


async def test_client_tools_are_refused_not_ignored(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["never said"])
    model = chat_model(mesh, agent)
    with pytest.raises(openai.BadRequestError) as refused:
        await model.bind_tools([book], tool_choice="required").ainvoke("Book Lisbon.")
    assert refused.value.param == "tool_choice"
    with pytest.raises(openai.BadRequestError) as refused:
        await model.with_structured_output(Trip, method="function_calling").ainvoke("Plan my trip.")
    assert refused.value.param in ("tools", "tool_choice")
