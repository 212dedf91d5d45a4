"""Port of `adk-loop-agent-tests.txt` (Google ADK's `loopagent` tests, `agent_test.go`, as the
document describes them): `TestNewLoopAgent`'s cases, each a test here, run through a whole
agentmesh mesh. A loop agent runs its sub-agents in order on every iteration, honours
`max_iterations` (0: no bound), and an escalation (`exit_loop`) ends it.

As in ADK, each case runs the loop on one user input, collects the events its sub-agents yield
(until the loop ends, or — for the unbounded loop — until as many as expected have come) and
compares them with the expected ones, ignoring what varies (ids, timestamps): an event is its
author and its content (model text, a function call, a function response, with its escalation).
Only the fixtures are adapted (see conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from agentmesh.gateway.v1 import gateway_service_pb2
from tests.integration.executor.support import LOOP, Project, Stack, calls

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass(frozen=True)
class Event:
    """What ADK's comparison keeps of a session event."""

    author: str
    text: str = ""
    function_call: str = ""
    function_response: str = ""
    escalate: bool = False


def declared(name: str) -> str:
    """ADK's snake_case agent name as an agentmesh agent name (a DNS label)."""
    return name.replace("_", "-")


async def new_custom_agent(stack: Stack, project: Project, id: int) -> str:
    """ADK's custom agent: each run yields one event, "hello <id>"."""
    name = declared(f"custom_agent_{id}")
    await stack.agent(project, name, mock_responses=[f"hello {id}"])
    return name


async def new_llm_agent_with_function_call(
    stack: Stack, project: Project, id: int, skip_summarization: bool
) -> str:
    """ADK's LLM agent on a fake model: it calls the escalating function first; unless the function
    skips summarization, the model is called again with its response and says "hello <id>"."""
    name = declared(f"llm_agent_{id}")
    if skip_summarization:
        script = [calls("exit_loop")]
    else:
        script = [calls("exit_loop", summarize=True), f"hello {id}"]
    await stack.agent(project, name, mock_responses=script)
    return name


async def new_loop_agent(stack: Stack, project: Project, max_iterations: int, sub_agents: list[str]) -> str:
    name = declared("test_agent")
    await stack.agent(project, name, kind=LOOP, sub_agents=sub_agents, max_iterations=max_iterations)
    return name


async def run(stack: Stack, project: Project, agent: str, *, stop_after: int = 0) -> list[Event]:
    """Runs the agent on a user input; the events its sub-agents yield, in order (the first
    `stop_after` only, when given: leaving then ends the run)."""
    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=f"{project.slug}/{agent}", message="user input"),
        metadata=stack.metadata,
    )
    got: list[Event] = []
    texts: dict[str, str] = {}

    def flush(run_id: str, author: str) -> None:
        if texts.get(run_id):
            got.append(Event(author, text=texts.pop(run_id)))

    try:
        async for response in call:
            event = response.event
            if not event.delegation_path:
                continue  # the loop agent's own run: it yields nothing but its sub-agents' events
            kind = event.WhichOneof("kind")
            if kind == "text_delta":
                texts[event.run_id] = texts.get(event.run_id, "") + event.text_delta.text
                continue
            flush(event.run_id, event.agent)
            if kind == "tool_call":
                got.append(Event(event.agent, function_call=event.tool_call.name))
            elif kind == "tool_result":
                got.append(Event(event.agent, function_response=event.tool_result.name))
            elif kind == "escalation":
                got[-1] = replace(got[-1], escalate=True)  # the action of the function's response
            if stop_after and len(got) >= stop_after:
                break
    finally:
        call.cancel()
    return got


async def test_new_loop_agent_infinite_loop(stack: Stack) -> None:
    project = await stack.project()
    loop = await new_loop_agent(stack, project, 0, [await new_custom_agent(stack, project, 0)])
    want = [Event("custom-agent-0", text="hello 0")]

    got = await run(stack, project, loop, stop_after=len(want))

    assert got == want


async def test_new_loop_agent_with_max_iterations(stack: Stack) -> None:
    project = await stack.project()
    loop = await new_loop_agent(stack, project, 1, [await new_custom_agent(stack, project, 0)])

    got = await run(stack, project, loop)

    assert got == [Event("custom-agent-0", text="hello 0")]


async def test_new_loop_agent_with_multiple_sub_agents(stack: Stack) -> None:
    project = await stack.project()
    sub_agents = [await new_custom_agent(stack, project, 0), await new_custom_agent(stack, project, 1)]
    loop = await new_loop_agent(stack, project, 2, sub_agents)

    got = await run(stack, project, loop)

    assert got == [
        Event("custom-agent-0", text="hello 0"),
        Event("custom-agent-1", text="hello 1"),
        Event("custom-agent-0", text="hello 0"),
        Event("custom-agent-1", text="hello 1"),
    ]


async def test_new_loop_agent_escalation_ends_the_loop(stack: Stack) -> None:
    project = await stack.project()
    sub_agents = [
        await new_llm_agent_with_function_call(stack, project, 0, skip_summarization=False),
        await new_custom_agent(stack, project, 1),
    ]
    loop = await new_loop_agent(stack, project, 0, sub_agents)

    got = await run(stack, project, loop)

    assert got == [
        Event("llm-agent-0", function_call="exit_loop"),
        Event("llm-agent-0", function_response="exit_loop", escalate=True),
        Event("llm-agent-0", text="hello 0"),
    ]


async def test_new_loop_agent_escalation_skipping_summarization_ends_the_loop(stack: Stack) -> None:
    project = await stack.project()
    sub_agents = [
        await new_llm_agent_with_function_call(stack, project, 0, skip_summarization=True),
        await new_custom_agent(stack, project, 1),
    ]
    loop = await new_loop_agent(stack, project, 0, sub_agents)

    got = await run(stack, project, loop)

    assert got == [
        Event("llm-agent-0", function_call="exit_loop"),
        Event("llm-agent-0", function_response="exit_loop", escalate=True),
    ]


async def test_new_loop_agent_named_as_in_the_example(stack: Stack) -> None:
    """The document's example usage, with its agent named exactly `test_agent`."""
    project = await stack.project()
    sub_agent = await new_custom_agent(stack, project, 0)
    await stack.agent(project, "test_agent", kind=LOOP, sub_agents=[sub_agent], max_iterations=1)

    got = await run(stack, project, "test_agent")

    assert got == [Event("custom-agent-0", text="hello 0")]
