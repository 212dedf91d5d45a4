"""The OpenAI Agents SDK against the OpenAI-compatible face: an SDK agent whose model is a mesh
agent answers, plain and streamed, with the SDK agent's instructions reaching the model — with the
SDK's default model (the Responses API, continued by `previous_response_id`, its `output_type` the
mesh agent's answer format) and with its Chat Completions model."""

from __future__ import annotations

from agents import Agent as SdkAgent
from agents import (
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from pydantic import BaseModel

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import root_client


async def test_an_sdk_agent_runs_on_a_mesh_agent_with_the_default_model(
    mesh: Mesh, api: Api, once: None
) -> None:
    set_tracing_disabled(True)  # the SDK would export its traces to OpenAI's servers
    agent = await api.agent(mock_responses=[{"echo_prompt": True}])
    # The SDK's default provider reads "project/agent" as a provider prefix; OpenAIProvider takes
    # the model name as it is, and gives the default model: the Responses API's.
    mesh_models = RunConfig(model_provider=OpenAIProvider(openai_client=root_client(mesh, agent.owner.token)))
    sdk_agent = SdkAgent(name="travel", instructions="Answer in French.", model=agent.model)

    result = await Runner.run(sdk_agent, "Hi", run_config=mesh_models)
    assert result.final_output == "system: Answer in French.\nuser: Hi"

    # The mesh keeps the conversation: the next turn sends only its input.
    streamed = Runner.run_streamed(
        sdk_agent, "Again", run_config=mesh_models, previous_response_id=result.last_response_id
    )
    async for _ in streamed.stream_events():
        pass
    assert (
        streamed.final_output
        == f"system: Answer in French.\nuser: Hi\nassistant: {result.final_output}\nuser: Again"
    )


class Trip(BaseModel):
    city: str
    nights: int


async def test_an_sdk_agents_output_type_is_the_mesh_agents_answer_format(
    mesh: Mesh, api: Api, once: None
) -> None:
    set_tracing_disabled(True)
    agent = await api.agent(mock_responses=['{"city": "Lisbon", "nights": 3}'])
    mesh_models = RunConfig(model_provider=OpenAIProvider(openai_client=root_client(mesh, agent.owner.token)))
    sdk_agent = SdkAgent(name="travel", model=agent.model, output_type=Trip)

    result = await Runner.run(sdk_agent, "Plan my trip.", run_config=mesh_models)
    assert result.final_output == Trip(city="Lisbon", nights=3)


async def test_an_sdk_agent_runs_on_a_mesh_agent_with_chat_completions(
    mesh: Mesh, api: Api, once: None
) -> None:
    set_tracing_disabled(True)
    agent = await api.agent(mock_responses=[{"echo_prompt": True}])
    model = OpenAIChatCompletionsModel(model=agent.model, openai_client=root_client(mesh, agent.owner.token))
    sdk_agent = SdkAgent(name="travel", instructions="Answer in French.", model=model)

    result = await Runner.run(sdk_agent, "Hi")
    assert result.final_output == "system: Answer in French.\nuser: Hi"

    streamed = Runner.run_streamed(sdk_agent, "Again")
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == "system: Answer in French.\nuser: Again"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_an_sdk_agents_function_tool_is_called_and_its_output_answered(
    mesh: Mesh, api: Api, once: None
) -> None:
    set_tracing_disabled(True)
    agent = await api.agent(
        mock_responses=[
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            {"echo_prompt": True},
        ]
    )
    mesh_models = RunConfig(model_provider=OpenAIProvider(openai_client=root_client(mesh, agent.owner.token)))
    sdk_agent = SdkAgent(name="travel", model=agent.model, tools=[get_weather])

    result = await Runner.run(sdk_agent, "Weather in Paris?", run_config=mesh_models)
    assert "tool: sunny in Paris" in result.final_output
