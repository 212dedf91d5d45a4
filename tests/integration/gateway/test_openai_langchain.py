"""LangChain's OpenAI chat model against the OpenAI-compatible face, as its users write it: a system
message reaches the agent's model, `with_structured_output` returns the parsed object (by JSON
schema, and by function calling), and `bind_tools`' tools are called by the agent's model and their
results, sent back, answered."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
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


async def test_bound_tools_are_called_and_their_results_answered(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(
        mock_responses=[
            {"tool_calls": [{"name": "book", "arguments": {"city": "Lisbon"}}]},
            {"echo_prompt": True},
        ]
    )
    model = chat_model(mesh, agent).bind_tools([book], tool_choice="required")
    asked = [HumanMessage("Book Lisbon.")]
    called = await model.ainvoke(asked)
    assert isinstance(called, AIMessage)
    [call] = called.tool_calls
    assert (call["name"], call["args"]) == ("book", {"city": "Lisbon"})

    # As LangChain's tool loop does: run the tool, send its result back with the conversation.
    result = await book.ainvoke(call)
    answered = await model.ainvoke([*asked, called, result])
    assert "tool: booked Lisbon" in str(answered.content)


async def test_structured_output_by_function_calling(mesh: Mesh, api: Api, once: None) -> None:
    agent = await api.agent(
        mock_responses=[{"tool_calls": [{"name": "Trip", "arguments": {"city": "Oslo", "nights": 2}}]}]
    )
    structured = chat_model(mesh, agent).with_structured_output(Trip, method="function_calling")
    assert await structured.ainvoke("Plan my trip.") == Trip(city="Oslo", nights=2)
