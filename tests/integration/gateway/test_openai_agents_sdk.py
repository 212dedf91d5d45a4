"""The OpenAI Agents SDK against the OpenAI-compatible face, with its Chat Completions model (its
default model speaks the Responses API, which the face does not serve): an SDK agent whose model is
a mesh agent answers, plain and streamed, with the SDK agent's instructions reaching the model."""

from __future__ import annotations

from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel, Runner, set_tracing_disabled

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.integration.gateway.test_openai import root_client


async def test_an_sdk_agent_runs_on_a_mesh_agent(mesh: Mesh, api: Api, once: None) -> None:
    set_tracing_disabled(True)  # the SDK would export its traces to OpenAI's servers
    agent = await api.agent(mock_responses=[{"echo_prompt": True}])
    model = OpenAIChatCompletionsModel(model=agent.model, openai_client=root_client(mesh, agent.owner.token))
    sdk_agent = SdkAgent(name="travel", instructions="Answer in French.", model=model)

    result = await Runner.run(sdk_agent, "Hi")
    assert result.final_output == "system: Answer in French.\nuser: Hi"

    streamed = Runner.run_streamed(sdk_agent, "Again")
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == "system: Answer in French.\nuser: Again"
