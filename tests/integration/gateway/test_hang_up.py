"""Hanging up at any moment: a client that closes its stream after any number
of events cancels the whole run tree, and the session is left with exactly one final event per
run and one `delegation_response` per `delegation_request`; both agents go idle."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest_asyncio

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.integration.gateway.delegating import delegating_agents
from tests.integration.gateway.support import Agent, Api, suffix
from tests.mesh import bearer
from tests.polling import eventually
from tests.run_log import is_final, log_problems

CHATS = 80


@pytest_asyncio.fixture(loop_scope="package")
async def channel(mesh: Mesh) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        yield channel


async def _hang_up(
    gateway: gw_grpc.GatewayServiceStub,
    coordinator: Agent,
    session_id: str,
    *,
    events: int = 1000,
    seconds: float = 30.0,
    after_request_seconds: float | None = None,
) -> int:
    """Opens a chat and closes it after `events` events, after `seconds`, or `after_request_seconds`
    after the delegation request arrived, whichever comes first; how many events arrived."""
    call = gateway.StreamChat(
        gw.StreamChatRequest(agent=coordinator.model, message="go", session_id=session_id),
        metadata=bearer(coordinator.owner.token),
    )
    received = 0

    async def read() -> None:
        nonlocal received
        async for response in call:
            received += 1
            if received >= events:
                return
            if after_request_seconds is not None and response.event.HasField("delegation_request"):
                await asyncio.sleep(after_request_seconds)
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), seconds)
    call.cancel()
    return received


async def test_hanging_up_at_any_point_leaves_one_end_per_run_and_one_response_per_delegation(
    channel: grpc.aio.Channel, api: Api
) -> None:
    worker, coordinator = await delegating_agents(api)
    owner = coordinator.owner
    gateway = gw_grpc.GatewayServiceStub(channel)
    sessions = [f"hang-up-{n}-{suffix()}" for n in range(CHATS)]

    # A third hang up after a number of events, a third after 0-40 ms whatever arrived, a third
    # within 0-5 ms of the delegation request (while the worker starts).
    def hang_up(n: int) -> dict[str, float]:
        return [{"events": n % 9 + 1}, {"seconds": n / 2000}, {"after_request_seconds": (n % 10) / 2000}][
            n % 3
        ]

    received = await asyncio.gather(
        *(_hang_up(gateway, coordinator, session, **hang_up(n)) for n, session in enumerate(sessions))
    )
    assert max(received) >= 5  # some hung up mid-delegation, not all before it began

    async def idle() -> bool:
        return {await api.status(worker), await api.status(coordinator)} == {"idle"}

    await eventually(idle, what="both agents are idle again")

    async def settled(session_id: str) -> bool:
        events = await api.session_events(coordinator, session_id)
        runs = {e["run_id"] for e in events}
        return all(any(is_final(e) for e in events if e["run_id"] == run) for run in runs)

    delegated = 0
    for session_id in sessions:
        with contextlib.suppress(AssertionError):  # reported with the whole log below
            await eventually(
                lambda session_id=session_id: settled(session_id), what=f"{session_id} ends its runs"
            )
        response = await api.http.get(
            f"/api/v1/projects/{coordinator.project_id}/sessions/{session_id}/events",
            params={"page_size": 1000},
            headers=owner.headers,
        )
        if response.status_code == 404:
            continue  # hung up before anything was recorded
        events = response.json()["events"]
        assert log_problems(events) == [], (session_id, events)
        delegated += any(e["event_type"] == "delegation_request" for e in events)
    assert delegated >= CHATS // 4
