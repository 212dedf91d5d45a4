"""Double texting (DESIGN §5): a message for a session whose run is still in
flight follows its policy — the agent's, or the request's — with concurrent messages into one
session: `enqueue` (default) runs them one after the other, in order; `reject` refuses them
(ABORTED / 409 naming the run in flight); `interrupt` cancels the run in flight, then runs. The
registry decides, so it holds when the messages arrive through two gateways on two executors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.integration.gateway.conftest import start_executor, start_gateway
from tests.integration.gateway.support import Agent, Api, suffix
from tests.integration.gateway.test_public_grpc import reason
from tests.mesh import bearer
from tests.polling import eventually
from tests.webhook_receiver import webhook_receiver

# About a second per run: 11 chunks of 64 characters, 0.1 s apart.
SLOW = {"content": "word " * 130, "delay_seconds": 0.1}
# Long enough that only an interrupt ends it early.
VERY_SLOW = {"content": "word " * 130, "delay_seconds": 3}
ENDS = ("agent_response", "error")


@pytest_asyncio.fixture(loop_scope="package")
async def channel(mesh: Mesh) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield channel


class Chats:
    """Streams chats into one session and notes, when each run starts, which runs had ended."""

    def __init__(self, channel: grpc.aio.Channel, api: Api, agent: Agent) -> None:
        self.gateway = gw_grpc.GatewayServiceStub(channel)
        self.api = api
        self.agent = agent
        self.session_id = f"dt-{suffix()}"

    def stream(self, message: str, policy: str = "") -> Any:
        return self.gateway.StreamChat(
            gw.StreamChatRequest(
                agent=self.agent.model, message=message, session_id=self.session_id, double_texting=policy
            ),
            metadata=bearer(self.agent.owner.token),
        )

    async def run(self, message: str, policy: str = "") -> tuple[list[run_pb2.RunEvent], set[str]]:
        """The chat's events, and the runs whose end was in the log when it started."""
        events: list[run_pb2.RunEvent] = []
        ended_at_start: set[str] = set()
        async for response in self.stream(message, policy):
            if response.event.HasField("run_started"):
                ended_at_start = await self.ended()
            events.append(response.event)
        return events, ended_at_start

    async def ended(self) -> set[str]:
        return {e["run_id"] for e in await self.log() if e["event_type"] in ENDS}

    async def log(self) -> list[dict[str, Any]]:
        try:
            return await self.api.session_events(self.agent, self.session_id)
        except AssertionError:  # the session does not exist yet
            return []

    async def inputs(self) -> list[str]:
        return [e["content"] for e in await self.log() if e["event_type"] == "user_message"]


async def test_enqueued_messages_run_one_after_another_in_their_order(
    channel: grpc.aio.Channel, api: Api
) -> None:
    agent = await api.agent(mock_responses=[SLOW])  # the default policy: enqueue
    chats = Chats(channel, api, agent)
    first = asyncio.create_task(chats.run("one"))
    await eventually(lambda: _has(chats, "one"), what="the first message recorded")
    second = asyncio.create_task(chats.run("two"))
    await eventually(lambda: _has(chats, "two"), what="the second message recorded")
    third = asyncio.create_task(chats.run("three", "enqueue"))
    results = await asyncio.gather(first, second, third)

    runs = [events[0].run_id for events, _ in results]
    for events, _ in results:
        assert events[-1].HasField("run_completed"), events[-1]
    # One after another, the first message first: each run started once every run that ended
    # before it had ended. The second and third go in the order the registry took their turns,
    # which may differ from the order their inputs reached the log (an input is recorded while
    # the registry takes its run's turn).
    ends = [e["run_id"] for e in await chats.log() if e["event_type"] in ENDS]
    assert sorted(ends) == sorted(runs) and ends[0] == runs[0], (ends, runs)
    ended_at_start = {run: ended for run, (_, ended) in zip(runs, results, strict=True)}
    for position, run in enumerate(ends):
        assert set(ends[:position]) <= ended_at_start[run], (position, ends, ended_at_start)
    await eventually(lambda: _idle(api, agent), what="the agent idle")


async def test_reject_refuses_a_message_while_a_run_is_in_flight(
    channel: grpc.aio.Channel, api: Api, http: httpx.AsyncClient
) -> None:
    agent = await api.agent(mock_responses=[SLOW], double_texting="reject")
    chats = Chats(channel, api, agent)
    first = chats.stream("one")
    started = (await anext(aiter(first))).event
    assert started.HasField("run_started")

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await chats.gateway.Chat(
            gw.ChatRequest(agent=agent.model, message="two", session_id=chats.session_id),
            metadata=bearer(agent.owner.token),
        )
    assert refused.value.code() == grpc.StatusCode.ABORTED
    assert reason(refused.value) == "SESSION_BUSY"
    assert started.run_id in (refused.value.details() or "")
    # The same over OpenAI's API: 409, naming the run.
    response = await http.post(
        "/v1/chat/completions",
        json={
            "model": agent.model,
            "session_id": chats.session_id,
            "messages": [{"role": "user", "content": "three"}],
        },
        headers=agent.owner.headers,
    )
    assert response.status_code == 409, response.text
    assert started.run_id in response.json()["error"]["message"]
    # The request may override the agent's policy: this one waits for its turn.
    queued, _ = await chats.run("four", "enqueue")
    assert queued[-1].HasField("run_completed")
    assert [response.event async for response in first][-1].HasField("run_completed")
    # A rejected message was never recorded; the session is free again afterwards.
    assert await chats.inputs() == ["one", "four"]
    done, _ = await chats.run("five")
    assert done[-1].HasField("run_completed")


@pytest.mark.parametrize("policy", ["reject", "enqueue", "interrupt"])
async def test_the_next_message_sent_the_moment_a_run_ends_finds_the_session_free(
    channel: grpc.aio.Channel, api: Api, policy: str
) -> None:
    """Once a caller has seen its run end, the session's turn is free: a message sent the instant
    `run_completed` arrives is neither refused (`reject`), nor kept waiting for, nor interrupting
    (`interrupt`), the run that just answered."""
    agent = await api.agent(mock_responses=["ok"], double_texting=policy)
    chats = Chats(channel, api, agent)
    runs: list[str] = []
    for index in range(200):
        events = [response.event async for response in chats.stream(f"m{index}", policy)]
        assert events[-1].HasField("run_completed"), (index, events[-1])
        assert events[-1].run_completed.content == "ok"
        runs.append(events[0].run_id)
    log = await chats.log()
    assert [e["content"] for e in log if e["event_type"] == "user_message"] == [f"m{i}" for i in range(200)]
    assert [e["run_id"] for e in log if e["event_type"] in ENDS] == runs
    assert {e["event_type"] for e in log if e["run_id"] in runs and e["event_type"] in ENDS} == {
        "agent_response"
    }


async def test_concurrent_rejecting_messages_let_exactly_one_run(channel: grpc.aio.Channel, api: Api) -> None:
    agent = await api.agent(mock_responses=[SLOW])
    chats = Chats(channel, api, agent)
    outcomes = await asyncio.gather(
        *(chats.run(f"m{index}", "reject") for index in range(5)), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    ran = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(ran) == 1 and ran[0][0][-1].HasField("run_completed")
    assert len(refused) == 4 and {error.code() for error in refused} == {grpc.StatusCode.ABORTED}
    await eventually(lambda: _idle(api, agent), what="the agent idle")


async def test_interrupt_cancels_the_run_in_flight_then_runs(channel: grpc.aio.Channel, api: Api) -> None:
    agent = await api.agent(mock_responses=[VERY_SLOW])
    async with webhook_receiver() as receiver:
        hooks = f"/api/v1/projects/{agent.project_id}/webhooks"
        made = await api.http.post(
            hooks,
            json={"url": receiver.url, "events": ["run.completed", "run.failed"]},
            headers=agent.owner.headers,
        )
        assert made.status_code == 201, made.text
        chats = Chats(channel, api, agent)
        first = asyncio.create_task(chats.run("one"))
        await eventually(lambda: _has(chats, "one"), what="the first message recorded")
        agent_fast = await _rescript(api, agent, ["done"], chats.session_id)
        second, ended_at_start = await chats.run("two", "interrupt")

        async def both_ended() -> bool:
            return len(receiver.delivered()) >= 2

        await eventually(both_ended, timeout=30, what="both runs' ends delivered")
        # The interrupted run's end is a cancel, told apart from a failure by its outcome.
        ends = {
            body["data"]["run_id"]: (body["type"], body["data"]["outcome"])
            for body in (json.loads(r.body) for r in receiver.delivered())
        }

    first_events, _ = await first
    assert ends == {
        first_events[0].run_id: ("run.failed", "cancelled"),
        second[0].run_id: ("run.completed", "completed"),
    }
    assert first_events[-1].HasField("run_failed"), first_events[-1]
    assert first_events[-1].run_failed.code == "CANCELLED"
    assert "interrupted by a newer message" in first_events[-1].run_failed.message
    assert first_events[0].run_id in ended_at_start
    assert second[-1].run_completed.content == "done"
    log = await chats.log()
    ends = [(e["run_id"], e["event_type"]) for e in log if e["event_type"] in ENDS]
    assert ends == [(first_events[0].run_id, "error"), (second[0].run_id, "agent_response")]
    await eventually(lambda: _idle(api, agent_fast), what="the agent idle")


async def test_interrupt_holds_across_gateways_and_executors(mesh: Mesh, api: Api) -> None:
    """The run in flight comes through one gateway to the mesh's executor; the interrupting
    message through another gateway to another executor, which cannot cancel it itself: the run's
    executor learns it from the registry (its next lease renewal)."""
    executor = await start_executor(mesh, executor_id=f"other-{suffix()}")
    first_gateway = await start_gateway(
        mesh, executor_addresses=[mesh.services["executor"].address], executor_discovery=False
    )
    second_gateway = await start_gateway(
        mesh, executor_addresses=[executor.address], executor_discovery=False
    )
    try:
        agent = await api.agent(mock_responses=[VERY_SLOW])
        async with (
            grpc.aio.insecure_channel(first_gateway.address) as one,
            grpc.aio.insecure_channel(second_gateway.address) as two,
        ):
            chats = Chats(one, api, agent)
            first = asyncio.create_task(chats.run("one"))
            await eventually(lambda: _has(chats, "one"), what="the first message recorded")
            await _rescript(api, agent, ["done"], chats.session_id)
            second, _ = await _same_session(Chats(two, api, agent), chats).run("two", "interrupt")
            first_events, _ = await first
        assert first_events[-1].run_failed.code == "CANCELLED"
        assert second[-1].run_completed.content == "done"
        assert first_events[0].run_started.executor_id != second[0].run_started.executor_id
    finally:
        for service in (second_gateway, first_gateway, executor):
            await service.stop(grace_seconds=1)


async def test_bad_policies_are_refused_naming_the_field(
    channel: grpc.aio.Channel, api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    gateway = gw_grpc.GatewayServiceStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await gateway.Chat(
            gw.ChatRequest(agent=agent.model, message="x", double_texting="later"),
            metadata=bearer(agent.owner.token),
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "double_texting" in (refused.value.details() or "")
    response = await http.post(
        "/v1/chat/completions",
        json={"model": agent.model, "messages": [{"role": "user", "content": "x"}], "double_texting": "x"},
        headers=agent.owner.headers,
    )
    assert response.status_code == 422 and response.json()["error"]["param"] == "double_texting"
    response = await http.patch(
        agent.path, json={"config": {"double_texting": "sometimes"}}, headers=agent.owner.headers
    )
    assert response.status_code == 422 and "config.double_texting" in response.text
    response = await http.patch(
        agent.path, json={"config": {"double_texting": "reject"}}, headers=agent.owner.headers
    )
    assert response.status_code == 200 and response.json()["config"]["double_texting"] == "reject"


def _same_session(chats: Chats, like: Chats) -> Chats:
    chats.session_id = like.session_id
    return chats


async def _rescript(api: Api, agent: Agent, responses: list[Any], session_id: str) -> Agent:
    """The agent answers the session's next runs with `responses` (its runs in flight keep their
    script): a new version, which the session moves to."""
    response = await api.http.patch(
        agent.path, json={"config": {"mock_responses": responses}}, headers=agent.owner.headers
    )
    assert response.status_code == 200, response.text
    response = await api.http.post(
        f"/api/v1/projects/{agent.project_id}/sessions/{session_id}/move",
        json={"version": "latest", "agent": agent.id},
        headers=agent.owner.headers,
    )
    assert response.status_code == 200, response.text
    return agent


async def _has(chats: Chats, message: str) -> bool:
    return message in await chats.inputs()


async def _idle(api: Api, agent: Agent) -> bool:
    return await api.status(agent) == "idle"
