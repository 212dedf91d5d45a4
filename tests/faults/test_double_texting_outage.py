"""Double texting through a memory outage: messages into one session
under each policy while the memory service is SIGKILLed and kept away, on processes and
PostgreSQL. `enqueue`: every message whose input was recorded runs once, one run after the other
in the order they were taken (no run starts before the one ahead of it ended, even when that one
could only record its end once memory was back); `reject`: refused with ABORTED (SESSION_BUSY)
while a turn is in flight, also during the outage (the registry decides); `interrupt`: every
run, interrupted or not, ends exactly once. Afterwards no session stays busy: a `reject`ed
message runs in each."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import pytest

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from tests.faults.processes import LEASE_SECONDS, Processes, run_bookkeeping, session_log, session_turns
from tests.integration.gateway.test_public_grpc import reason
from tests.mesh import MeshClient, Seeded, bearer
from tests.polling import eventually
from tests.run_log import log_problems

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

# About two seconds per run (16 chunks, 0.1 s apart), so the kill lands mid-run.
SLOW = {"content": "part " * 200, "delay_seconds": 0.1}
AWAY_SECONDS = 4.0
ENDS = ("agent_response", "error")


@dataclass
class Chat:
    """One message's client: what it saw."""

    message: str
    run_id: str = ""
    final: str = ""
    error: grpc.aio.AioRpcError | None = None
    # The runs whose end was in the log when this run started (read once memory answered).
    ended_at_start: set[str] = field(default_factory=set)


class Session:
    """Messages into one session, each a stream through the gateway."""

    def __init__(
        self,
        gateway: gw_grpc.GatewayServiceStub,
        http: httpx.AsyncClient,
        agent: Seeded,
        name: str,
        database_url: str,
    ):
        self._gateway = gateway
        self._database_url = database_url
        self._http = http
        self._agent = agent
        self.session_id = name
        self.chats: list[Chat] = []
        self._tasks: list[asyncio.Task[None]] = []

    def send(self, message: str, policy: str) -> Chat:
        chat = Chat(message)
        self.chats.append(chat)
        self._tasks.append(asyncio.create_task(self._stream(chat, policy)))
        return chat

    async def sent(self, message: str, policy: str) -> Chat:
        """A message sent, and its client's call over."""
        chat = self.send(message, policy)
        await self._tasks[-1]
        return chat

    async def taken(self, message: str, policy: str) -> Chat:
        """A message sent, and its turn taken in the registry: a message sent after it is taken
        after it. (Its input being recorded is not enough: a run of an agent its executor knows
        records its input beside its start, before it asks for its turn.)"""
        before = await session_turns(self._database_url, self._agent.project_id, self.session_id)
        chat = self.send(message, policy)

        async def turn_taken() -> bool:
            return bool(
                await session_turns(self._database_url, self._agent.project_id, self.session_id) - before
            )

        await eventually(turn_taken, timeout=LEASE_SECONDS * 10, what=f"{message!r} takes its turn")
        await self.recorded(message)
        return chat

    async def recorded(self, message: str) -> None:
        async def in_log() -> bool:
            return message in [e["content"] for e in await self.log() if e["event_type"] == "user_message"]

        await eventually(in_log, timeout=LEASE_SECONDS * 10, what=f"{message!r} is recorded")

    async def finish(self) -> None:
        await asyncio.wait_for(asyncio.gather(*self._tasks), LEASE_SECONDS * 40)

    async def log(self) -> list[dict[str, Any]]:
        try:
            return await session_log(self._http, self._agent.project_id, self.session_id)
        except httpx.HTTPError:
            return []

    async def _ended(self) -> set[str]:
        async def read() -> set[str] | None:
            try:
                response = await self._http.get(
                    f"/api/v1/projects/{self._agent.project_id}/sessions/{self.session_id}/events",
                    params={"page_size": 1000},
                )
            except httpx.HTTPError:
                return None
            if response.status_code != 200:  # memory away
                return None
            return {e["run_id"] for e in response.json()["events"] if e["event_type"] in ENDS}

        ended: set[str] | None = None

        async def answered() -> bool:
            nonlocal ended
            ended = await read()
            return ended is not None

        await eventually(answered, timeout=LEASE_SECONDS * 20, what="the session's log is readable")
        return ended or set()

    async def _stream(self, chat: Chat, policy: str) -> None:
        call = self._gateway.StreamChat(
            gw.StreamChatRequest(
                agent=self._agent.ref, message=chat.message, session_id=self.session_id, double_texting=policy
            ),
            metadata=bearer(self._agent.token),
            timeout=LEASE_SECONDS * 30,
        )
        try:
            async for response in call:
                event = response.event
                if event.HasField("run_started"):
                    chat.run_id = event.run_id
                    chat.ended_at_start = await self._ended()
                for final in ("run_completed", "run_failed"):
                    if event.HasField(final) and event.run_id == chat.run_id:
                        chat.final = final
        except grpc.aio.AioRpcError as error:
            chat.error = error


async def test_each_policy_holds_through_a_memory_outage(processes: Processes) -> None:
    mesh = processes
    client = MeshClient(mesh.registry.grpc_address, mesh.gateway.grpc_address)
    try:
        token = await client.login()
        agent = await client.seed_agent(token, name="texted", mock_responses=[SLOW])
        gateway = gw_grpc.GatewayServiceStub(client._gateway_channel)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=mesh.gateway.http_url, headers=headers, timeout=10) as http:
            queued, rejecting, interrupting = (
                Session(gateway, http, agent, name, mesh.database_url)
                for name in ("dt-enqueue", "dt-reject", "dt-interrupt")
            )
            # Three enqueued messages, each taken after the one before (their order is known).
            for n in range(3):
                await queued.taken(f"enqueued {n}", "enqueue")
            for session in (rejecting, interrupting):
                await session.taken("first", "enqueue")

            await mesh.memory.kill()
            # The registry decides: a turn is in flight, so `reject` is refused at once.
            refused = await rejecting.sent("refused while busy", "reject")
            assert refused.error is not None and refused.error.code() == grpc.StatusCode.ABORTED, refused
            assert reason(refused.error) == "SESSION_BUSY", refused.error
            # An interrupting message whose input cannot be recorded yet, and one more in the queue.
            interrupting.send("interrupting", "interrupt")
            queued.send("enqueued during the outage", "enqueue")
            await asyncio.sleep(AWAY_SECONDS)
            await mesh.memory.start()

            for session in (queued, rejecting, interrupting):
                await session.finish()

            # enqueue: every recorded message ran once, one after the other, in the order taken.
            log = await queued.log()
            inputs = [e["content"] for e in log if e["event_type"] == "user_message"]
            for n in range(3):
                assert inputs.count(f"enqueued {n}") == 1, inputs
            started = [chat for chat in queued.chats if chat.run_id]
            for earlier, later in itertools.pairwise(started):
                assert earlier.run_id in later.ended_at_start, (earlier, later)
            ends = {e["run_id"]: e["seq"] for e in log if e["event_type"] in ENDS and e["run_id"]}
            ordered = [ends[chat.run_id] for chat in queued.chats[:3]]
            assert ordered == sorted(ordered), (ordered, log)
            # The two taken after the one memory's death failed ran to their answers.
            assert [chat.final for chat in queued.chats[1:3]] == ["run_completed"] * 2, queued.chats

            # Every run of every session ended exactly once; nothing is left in the registry.
            async def settled() -> bool:
                logs = [await session.log() for session in (queued, rejecting, interrupting)]
                books = await run_bookkeeping(mesh.database_url)
                return all(events and not log_problems(events) for events in logs) and books.settled

            await eventually(
                settled, timeout=LEASE_SECONDS * 15, what="every run ended once, the books empty"
            )
            rejected_log = await rejecting.log()
            assert "refused while busy" not in [e["content"] for e in rejected_log], rejected_log

            # No session stays busy: a `reject`ed message now runs in each.
            for session in (queued, rejecting, interrupting):
                after = await session.sent("after the outage", "reject")
                assert after.error is None and after.final == "run_completed", (session.session_id, after)
    finally:
        await client.close()
