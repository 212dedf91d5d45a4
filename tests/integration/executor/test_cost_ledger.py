"""The cost ledger through the whole mesh: every model call of a two-level delegation tree is
priced from the executor's price table, rolled up exactly into the addressed run's end event, and
entered once in the registry's ledger, which the usage API sums per agent, user, model, session
and day — on both databases. A model without a price has an unknown cost, said as such."""

from __future__ import annotations

import datetime
from typing import Any

import grpc
import pytest

from agentmesh.registry.v1 import registry_service_pb2 as reg
from tests.integration.executor.support import Agent, Project, Stack, delegate, final
from tests.polling import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

# US dollars per million tokens, by model name.
PRICES = {
    "mock": {"input_per_million_tokens": 1.0, "output_per_million_tokens": 4.0},
    "mock/large": {
        "input_per_million_tokens": 10.0,
        "output_per_million_tokens": 30.0,
        "cached_input_per_million_tokens": 2.5,
    },
}


@pytest.fixture(scope="module")
def executor_settings() -> dict[str, Any]:
    return {"model_prices": PRICES}


def scripted(response: str | dict[str, Any], input_tokens: int, output_tokens: int, cached: int = 0) -> dict:
    item = {"content": response} if isinstance(response, str) else dict(response)
    item["usage"] = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_input_tokens": cached,
    }
    return item


def cost(model: str, input_tokens: int, output_tokens: int, cached: int = 0) -> float:
    price = PRICES[model]
    cached_price = price.get("cached_input_per_million_tokens", price["input_per_million_tokens"])
    return (
        (input_tokens - cached) * price["input_per_million_tokens"]
        + cached * cached_price
        + output_tokens * price["output_per_million_tokens"]
    ) / 1_000_000


async def summarize(
    stack: Stack, project: Project, *group_by: int, **days: str
) -> reg.SummarizeUsageResponse:
    return await stack.client.registry.SummarizeUsage(
        reg.SummarizeUsageRequest(project_id=project.id, group_by=list(group_by), **days),
        metadata=stack.metadata,
    )


async def ledger_calls(stack: Stack, project: Project, expected: int) -> reg.SummarizeUsageResponse:
    """The project's summary once `expected` calls are in it (executors report runs' ends in
    batches, after their streams end)."""
    summary: reg.SummarizeUsageResponse | None = None

    async def counted() -> bool:
        nonlocal summary
        summary = await summarize(stack, project)
        return summary.total.calls >= expected

    await eventually(counted, what=f"{expected} calls in the ledger")
    assert summary is not None and summary.total.calls == expected
    return summary


async def tree(stack: Stack, project: Project) -> tuple[Agent, Agent, Agent]:
    """coordinator (mock) → manager (mock/large) → worker (mock): two levels of delegation."""
    worker = await stack.agent(project, "worker", mock_responses=[scripted("Done: 42.", 300, 20)])
    manager = await stack.agent(
        project,
        "manager",
        model="mock/large",
        network_access=["worker"],
        mock_responses=[
            scripted(delegate("worker", "Compute 42"), 1000, 50, cached=400),
            scripted("The worker computed 42.", 1200, 30, cached=900),
        ],
    )
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["manager"],
        mock_responses=[scripted(delegate("manager", "Get 42 computed"), 500, 40), scripted("42.", 700, 5)],
    )
    return coordinator, manager, worker


# Every call of the tree: (agent, model, input, output, cached).
CALLS = [
    ("coordinator", "mock", 500, 40, 0),
    ("coordinator", "mock", 700, 5, 0),
    ("manager", "mock/large", 1000, 50, 400),
    ("manager", "mock/large", 1200, 30, 900),
    ("worker", "mock", 300, 20, 0),
]


def sums(calls: list[tuple[str, str, int, int, int]]) -> tuple[int, int, int, float]:
    return (
        sum(c[2] for c in calls),
        sum(c[3] for c in calls),
        sum(c[4] for c in calls),
        sum(cost(c[1], c[2], c[3], c[4]) for c in calls),
    )


async def test_the_ledger_sums_every_call_of_a_delegation_tree(stack: Stack) -> None:
    project = await stack.project()
    coordinator, _, _ = await tree(stack, project)

    events = await stack.chat(coordinator, "What is 42?")

    input_tokens, output_tokens, cached, total_cost = sums(CALLS)
    usage = final(events).run_completed.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (
        input_tokens,
        output_tokens,
        cached,
    )
    assert usage.cost == pytest.approx(total_cost) and usage.cost_known and not usage.unpriced_models

    summary = await ledger_calls(stack, project, len(CALLS))
    total = summary.total.usage
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (
        input_tokens,
        output_tokens,
        cached,
    )
    assert total.cost == pytest.approx(total_cost) and total.cost_known
    assert summary.total.runs == 3 and not summary.truncated

    by_agent = await summarize(stack, project, reg.USAGE_DIMENSION_AGENT)
    assert sorted((g.agent, g.runs, g.calls) for g in by_agent.groups) == [
        ("coordinator", 1, 2),
        ("manager", 1, 2),
        ("worker", 1, 1),
    ]
    for group in by_agent.groups:
        own = [c for c in CALLS if c[0] == group.agent]
        assert group.usage.cost == pytest.approx(sums(own)[3])
        assert group.usage.input_tokens == sums(own)[0]

    by_model = await summarize(stack, project, reg.USAGE_DIMENSION_MODEL)
    assert [(g.model, g.calls, g.agent) for g in by_model.groups] == [("mock", 3, ""), ("mock/large", 2, "")]
    large = [c for c in CALLS if c[1] == "mock/large"]
    assert by_model.groups[1].usage.cost == pytest.approx(sums(large)[3])

    session = events[-1].session_id
    by_session_day_user = await summarize(
        stack, project, reg.USAGE_DIMENSION_SESSION, reg.USAGE_DIMENSION_DAY, reg.USAGE_DIMENSION_USER
    )
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    [group] = by_session_day_user.groups
    assert (group.session_id, group.day, group.calls, group.runs) == (session, today, len(CALLS), 3)
    assert group.user_id  # the signed-in superuser's id, whose chat it was

    tomorrow = (datetime.datetime.now(datetime.UTC).date() + datetime.timedelta(days=1)).isoformat()
    later = await summarize(stack, project, reg.USAGE_DIMENSION_AGENT, start_day=tomorrow)
    assert not later.groups and later.total.calls == 0


async def test_a_model_without_a_price_has_an_unknown_cost(stack: Stack) -> None:
    project = await stack.project()
    worker = await stack.agent(
        project, "worker", model="mock/unpriced", mock_responses=[scripted("Done.", 100, 10)]
    )
    coordinator = await stack.agent(
        project,
        "coordinator",
        network_access=["worker"],
        mock_responses=[scripted(delegate("worker", "Do it"), 200, 20), scripted("Done.", 300, 30)],
    )
    assert worker

    events = await stack.chat(coordinator, "Do it")

    usage = final(events).run_completed.usage
    assert not usage.cost_known and list(usage.unpriced_models) == ["mock/unpriced"]
    # What is priced is still counted: the coordinator's own calls.
    assert usage.cost == pytest.approx(cost("mock", 200, 20) + cost("mock", 300, 30))

    summary = await ledger_calls(stack, project, 3)
    assert not summary.total.usage.cost_known and list(summary.total.usage.unpriced_models) == [
        "mock/unpriced"
    ]
    by_model = await summarize(stack, project, reg.USAGE_DIMENSION_MODEL)
    assert [(g.model, g.usage.cost_known) for g in by_model.groups] == [
        ("mock", True),
        ("mock/unpriced", False),
    ]


async def test_the_usage_api_refuses_a_malformed_range(stack: Stack) -> None:
    project = await stack.project()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await summarize(stack, project, start_day="2026-13-01")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await summarize(stack, project, start_day="2026-11-02", end_day="2026-11-01")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stack.client.registry.SummarizeUsage(
            reg.SummarizeUsageRequest(project_id="no-such-project"), metadata=stack.metadata
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
