"""A delegation request that memory stores while its executor hears nothing back — the answer
late or lost, the executor gave up on it, as on a loaded host — still gets its one
`delegation_response` (exactly one response per request). The executor does not know
whether the step's append was stored, so it asks memory again under the request's own key,
learns that it was, and answers it; the delegation was never sent. Memory sits behind a proxy
that holds its answers from the request's first append until the executor sends it again — or
until the time after (memory slow for longer than two appends are waited for): the executor
keeps asking until memory answers."""

from __future__ import annotations

import json
import uuid

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import ExecutorClient
from tests.bearer import service_channel
from tests.holding_proxy import HoldingProxy
from tests.integration.executor.support import Stack, delegate, event_type, extra_executor, kind

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.mark.parametrize("answered_at", [2, 3], ids=["second-append", "third-append"])
async def test_a_request_stored_while_its_executor_heard_nothing_back_gets_its_response(
    stack: Stack, answered_at: int
) -> None:
    task = f"task-{uuid.uuid4().hex}"  # the marker the proxy watches for
    project = await stack.project()
    await stack.agent(project, "worker", mock_responses=["never asked"])
    coordinator = await stack.agent(
        project, "coordinator", network_access=["worker"], mock_responses=[delegate("worker", task)]
    )
    memory = stack.mesh.services["memory"]
    request = stack.run_request(coordinator, "go")
    async with HoldingProxy(
        lambda: memory.address, task.encode(), hold_from=1, hold_until=answered_at
    ) as proxy:
        executor = await extra_executor(
            stack,
            "behind-a-proxy",
            memory_address=proxy.address,
            cleanup_timeout_seconds=2.0,  # how long the step's append is waited for
        )
        try:
            async with service_channel(executor.address) as channel:
                events = [e async for e in ExecutorClient(channel).run(request, metadata=stack.metadata)]
        finally:
            await executor.stop(1)
        assert proxy.sightings == answered_at, "the request was sent once, then asked about until answered"

    responses = [e.delegation_response for e in events if kind(e) == "delegation_response"]
    assert [r.outcome for r in responses] == [run_pb2.DELEGATION_OUTCOME_FAILED]
    assert "not sent" in responses[0].content
    assert [kind(e) for e in events][-3:] == ["delegation_request", "delegation_response", "run_failed"]
    assert events[-1].run_failed.code == "UNAVAILABLE", events[-1]
    assert "memory service did not answer" in events[-1].run_failed.message

    stored = await stack.events(request.session_id)
    (sent,) = [e for e in stored if event_type(e) == "delegation_request"]
    (answered,) = [e for e in stored if event_type(e) == "delegation_response"]
    assert answered.delegation_id == sent.delegation_id == responses[0].delegation_id
    assert answered.parent_event_id == sent.id
    assert json.loads(answered.content)["outcome"] == "failed"
    assert json.loads(sent.content)["task"] == task
    assert not [e for e in stored if e.agent == "worker"], "the delegation was never sent"
    assert event_type(stored[-1]) == "error"
