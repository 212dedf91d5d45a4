"""A chat's budget (`x-agentmesh-max-tokens` / `x-agentmesh-max-cost` metadata on the gateway's
StreamChat): a run that has spent it calls its model no more and ends RESOURCE_EXHAUSTED with
reason BUDGET_EXCEEDED and what it spent; a delegated run gets what is left of its caller's, and
when it runs out the caller is told so as the delegation's result, then stops too. The ledger
still counts every call made. A project's budgets bound its runs from what the ledger holds: a
run ends once it spent what was left when it started, and the next is refused."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.executor.support import Agent, Stack, calls, delegate, final, kind
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAILED = 5  # DELEGATION_OUTCOME_FAILED


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {
        "model_prices": {"mock": {"input_per_million_tokens": 1000.0, "output_per_million_tokens": 1000.0}}
    }


def spends(item: str | dict[str, Any], input_tokens: int, output_tokens: int) -> dict[str, Any]:
    scripted = {"content": item} if isinstance(item, str) else dict(item)
    scripted["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return scripted


async def chat(stack: Stack, agent: Agent, message: str, **budget: str) -> list[Any]:
    headers = tuple((f"x-agentmesh-{name.replace('_', '-')}", value) for name, value in budget.items())
    call = stack.client.gateway.StreamChat(
        gateway_service_pb2.StreamChatRequest(agent=agent.ref, message=message),
        metadata=stack.metadata + headers,
    )
    return [response.event async for response in call]


async def ledger_holds(stack: Stack, project_id: str, *, calls: int) -> bool:
    summary = await stack.client.registry.SummarizeUsage(
        reg.SummarizeUsageRequest(project_id=project_id), metadata=stack.metadata
    )
    return summary.total.calls == calls


def budget_exceeded(event: Any) -> bool:
    failed = event.run_failed
    return (
        failed.code == "RESOURCE_EXHAUSTED"
        and failed.status.details
        and "BUDGET_EXCEEDED" in str(failed.status.details[0].value)
    )


async def test_a_run_stops_once_its_token_budget_is_spent(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "looper",
        tools=["get_current_time"],
        mock_responses=[
            spends(calls("get_current_time"), 500, 100),
            spends(calls("get_current_time"), 500, 100),
            spends("never asked", 500, 100),
        ],
    )

    events = await chat(stack, agent, "Keep going", max_tokens="1000")

    end = final(events)
    assert kind(end) == "run_failed" and budget_exceeded(end), end
    assert "1200 of its 1000 tokens" in end.run_failed.message
    assert end.run_failed.usage.input_tokens + end.run_failed.usage.output_tokens == 1200
    assert [kind(e) for e in events].count("step_started") == 2  # the third call was never made


async def test_a_delegate_that_runs_out_tells_its_caller_which_stops_too(stack: Stack) -> None:
    project = await stack.project()
    await stack.agent(
        project,
        "worker",
        tools=["get_current_time"],
        mock_responses=[
            spends(calls("get_current_time"), 400, 100),
            spends(calls("get_current_time"), 400, 100),
            spends("never asked", 400, 100),
        ],
    )
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[spends(delegate("worker", "Work hard"), 100, 0), spends("never asked", 100, 0)],
    )

    events = await chat(stack, coordinator, "Get it done", max_tokens="1000")

    below = [e for e in events if e.delegation_path and kind(e) == "run_failed"]
    assert len(below) == 1 and budget_exceeded(below[0])
    assert "1000 of its 900 tokens" in below[0].run_failed.message  # what its caller had left
    response = next(e.delegation_response for e in events if kind(e) == "delegation_response")
    assert response.outcome == FAILED and "budget is spent" in response.content
    end = final(events)
    assert kind(end) == "run_failed" and budget_exceeded(end)
    assert end.run_failed.usage.input_tokens + end.run_failed.usage.output_tokens == 1100

    await eventually(lambda: ledger_holds(stack, project.id, calls=3), what="the three calls in the ledger")


async def test_a_cost_budget_stops_a_run(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "spender",
        tools=["get_current_time"],
        mock_responses=[spends(calls("get_current_time"), 100, 0), spends("never asked", 100, 0)],
    )

    # $0.1 a call (1000 $ per million tokens, 100 tokens): a budget of $0.05 lets one call happen.
    events = await chat(stack, agent, "Spend", max_cost="0.05")

    end = final(events)
    assert kind(end) == "run_failed" and budget_exceeded(end)
    assert end.run_failed.usage.cost == pytest.approx(0.1) and end.run_failed.usage.cost_known


async def test_a_malformed_budget_is_refused(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(project, "any", mock_responses=["Hi."])
    for name, value in (("max_tokens", "many"), ("max_cost", "-1"), ("max_tokens", "0")):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await chat(stack, agent, "Hi", **{name: value})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_agent_types_run_budget_stops_its_runs(stack: Stack) -> None:
    project = await stack.project()
    agent = await stack.agent(
        project,
        "bounded",
        tools=["get_current_time"],
        run_budget=run_pb2.Budget(max_tokens=1000),
        mock_responses=[
            spends(calls("get_current_time"), 500, 100),
            spends(calls("get_current_time"), 500, 100),
            spends("never asked", 500, 100),
        ],
    )
    stored = await stack.client.registry.GetAgentType(
        reg.GetAgentTypeRequest(id=(await stack.get(agent)).agent_type_id), metadata=stack.metadata
    )
    assert stored.agent_type.run_budget.max_tokens == 1000

    events = await chat(stack, agent, "Keep going")  # no budget of the chat's own

    end = final(events)
    assert kind(end) == "run_failed" and budget_exceeded(end)
    assert "1200 of its 1000 tokens" in end.run_failed.message

    # A chat's budget smaller than the type's wins.
    events = await chat(stack, agent, "Keep going", max_tokens="500")
    assert "600 of its 500 tokens" in final(events).run_failed.message


async def test_a_projects_daily_cost_budget_ends_its_run_then_refuses_the_next(stack: Stack) -> None:
    project = await stack.project()
    await stack.client.registry.UpdateProject(
        reg.UpdateProjectRequest(
            project=resources_pb2.Project(
                id=project.id, limits=resources_pb2.ProjectLimits(cost_per_day=0.15)
            ),
            update_mask=field_mask_pb2.FieldMask(paths=["limits"]),
        ),
        metadata=stack.metadata,
    )
    agent = await stack.agent(
        project,
        "tenant",
        tools=["get_current_time"],
        mock_responses=[
            spends(calls("get_current_time"), 100, 0),
            spends(calls("get_current_time"), 100, 0),
            spends("never asked", 100, 0),
        ],
    )

    # $0.1 a call: the second passes what the project had left ($0.15), so no third is made.
    end = final(await chat(stack, agent, "Spend"))
    assert kind(end) == "run_failed" and budget_exceeded(end), end
    assert "$0.200000 of its $0.150000" in end.run_failed.message

    await eventually(lambda: ledger_holds(stack, project.id, calls=2), what="its two calls in the ledger")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await chat(stack, agent, "Spend more")
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "project limit cost_per_day reached: $0.200000 of $0.150000 spent today" in str(
        refused.value.details()
    )
