"""The gateway's faces behind one small interface, so one behaviour suite runs over each of them
(as a2a-python's does): `RestTransport` drives the HTTP face with httpx (REST/JSON plus the
OpenAI-compatible chat), `GrpcTransport` the public gRPC API. Both answer in the same plain
terms, and a refusal is a `Refused` with the same `Failure` whichever status it came as."""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import grpc
import httpx

from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.gateway.v1 import gateway_service_pb2_grpc as gw_grpc
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentmesh.memory.v1 import resources_pb2 as mem_resources
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import registry_service_pb2_grpc as reg_grpc
from agentmesh.registry.v1 import resources_pb2
from tests.integration.gateway.support import Agent, User
from tests.mesh import bearer


class Failure(enum.Enum):
    """What a refusal means, the same over every face (gRPC code ↔ HTTP status)."""

    NOT_FOUND = "not found"  # NOT_FOUND ↔ 404
    # FAILED_PRECONDITION ↔ 400 (or 422): an invalid transition, a paused or terminated agent
    INVALID_STATE = "invalid state"
    FORBIDDEN = "forbidden"  # PERMISSION_DENIED ↔ 403
    OTHER = "other"


_BY_CODE = {
    grpc.StatusCode.NOT_FOUND: Failure.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION: Failure.INVALID_STATE,
    grpc.StatusCode.PERMISSION_DENIED: Failure.FORBIDDEN,
}
_BY_STATUS = {
    404: Failure.NOT_FOUND,
    400: Failure.INVALID_STATE,
    422: Failure.INVALID_STATE,
    403: Failure.FORBIDDEN,
}


class Refused(Exception):
    def __init__(self, failure: Failure, detail: str) -> None:
        super().__init__(f"{failure.value}: {detail}")
        self.failure = failure


@dataclass
class Answer:
    session_id: str
    content: str


@dataclass
class Event:
    """A session event as the suite compares it."""

    seq: int
    event_type: str
    agent: str


@dataclass
class Stream:
    """A streamed chat as it goes: the answer's text pieces, and how it ended ("" while open)."""

    session_id: str
    texts: list[str] = field(default_factory=list)
    ending: str = ""  # "completed" or "failed"


class Transport(Protocol):
    name: str

    async def chat(self, user: User, agent: Agent, message: str, session_id: str = "") -> Answer: ...

    def stream(self, user: User, agent: Agent, message: str, session_id: str) -> AsyncIterator[Stream]:
        """Yields the stream after every piece of text and once more when it ended."""
        ...

    async def events(
        self, user: User, project_id: str, session_id: str, *, page_size: int, page_token: str = ""
    ) -> tuple[list[Event], str]: ...

    async def pause(self, user: User, agent: Agent) -> str: ...

    async def resume(self, user: User, agent: Agent) -> str: ...

    async def terminate(self, user: User, agent: Agent) -> None: ...

    async def status(self, user: User, agent: Agent) -> str: ...


class RestTransport:
    """The HTTP face: REST/JSON for agents and sessions, the OpenAI-compatible API for chats."""

    name = "rest"

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def _json(self, method: str, path: str, user: User, **kwargs: object) -> dict:
        response = await self._http.request(method, path, headers=user.headers, **kwargs)  # type: ignore[arg-type]
        _check(response)
        return response.json()

    async def chat(self, user: User, agent: Agent, message: str, session_id: str = "") -> Answer:
        headers = {**user.headers, **({"X-Session-Id": session_id} if session_id else {})}
        response = await self._http.post(
            f"{agent.base}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": message}]},
            headers=headers,
        )
        _check(response)
        return Answer(response.headers["X-Session-Id"], response.json()["choices"][0]["message"]["content"])

    async def stream(self, user: User, agent: Agent, message: str, session_id: str) -> AsyncIterator[Stream]:
        body = {"messages": [{"role": "user", "content": message}], "stream": True}
        headers = {**user.headers, "X-Session-Id": session_id}
        async with self._http.stream(
            "POST", f"{agent.base}/v1/chat/completions", json=body, headers=headers
        ) as response:
            if response.status_code != 200:
                await response.aread()
                _check(response)
            stream = Stream(response.headers["X-Session-Id"])
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line.removeprefix("data: ")
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    stream.ending = "failed"
                    break
                for choice in chunk["choices"]:
                    if choice["delta"].get("content"):
                        stream.texts.append(choice["delta"]["content"])
                        yield stream
                    if choice["finish_reason"]:
                        stream.ending = "completed"
            yield stream

    async def events(
        self, user: User, project_id: str, session_id: str, *, page_size: int, page_token: str = ""
    ) -> tuple[list[Event], str]:
        body = await self._json(
            "GET",
            f"/api/v1/projects/{project_id}/sessions/{session_id}/events",
            user,
            params={"page_size": page_size, "page_token": page_token},
        )
        events = [Event(e["seq"], e["event_type"], e["agent"]) for e in body["events"]]
        return events, body["next_page_token"]

    async def pause(self, user: User, agent: Agent) -> str:
        return (await self._json("POST", f"{agent.path}/pause", user))["status"]

    async def resume(self, user: User, agent: Agent) -> str:
        return (await self._json("POST", f"{agent.path}/resume", user))["status"]

    async def terminate(self, user: User, agent: Agent) -> None:
        await self._json("DELETE", agent.path, user)

    async def status(self, user: User, agent: Agent) -> str:
        return (await self._json("GET", agent.path, user))["status"]


def _check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise Refused(_BY_STATUS.get(response.status_code, Failure.OTHER), response.text)


class GrpcTransport:
    """The public gRPC API: GatewayService chats, the registry's and memory's RPCs it serves."""

    name = "grpc"

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._gateway = gw_grpc.GatewayServiceStub(channel)
        self._registry = reg_grpc.RegistryServiceStub(channel)
        self._memory = mem_grpc.MemoryServiceStub(channel)

    async def chat(self, user: User, agent: Agent, message: str, session_id: str = "") -> Answer:
        request = gw.ChatRequest(agent=agent.model, message=message, session_id=session_id)
        with _refusals():
            response = await self._gateway.Chat(request, metadata=bearer(user.token))
        return Answer(response.session_id, response.content)

    async def stream(self, user: User, agent: Agent, message: str, session_id: str) -> AsyncIterator[Stream]:
        request = gw.StreamChatRequest(agent=agent.model, message=message, session_id=session_id)
        call = self._gateway.StreamChat(request, metadata=bearer(user.token))
        stream = Stream(session_id)
        with _refusals():
            stream.session_id = dict(await call.initial_metadata()).get("x-session-id", session_id)
        run_id = ""
        try:
            async for response in call:
                event = response.event
                run_id = run_id or event.run_id
                if event.run_id != run_id:
                    continue
                if event.HasField("text_delta"):
                    stream.texts.append(event.text_delta.text)
                    yield stream
                elif event.HasField("run_completed"):
                    stream.ending = "completed"
                elif event.HasField("run_failed"):
                    stream.ending = "failed"
        except grpc.aio.AioRpcError as error:
            if not stream.texts:
                raise Refused(_BY_CODE.get(error.code(), Failure.OTHER), error.details() or "") from None
            stream.ending = "failed"
        finally:
            call.cancel()
        yield stream

    async def events(
        self, user: User, project_id: str, session_id: str, *, page_size: int, page_token: str = ""
    ) -> tuple[list[Event], str]:
        request = mem.ListEventsRequest(session_id=session_id, page_size=page_size, page_token=page_token)
        with _refusals():
            response = await self._memory.ListEvents(request, metadata=bearer(user.token))
        events = [
            Event(
                e.seq,
                mem_resources.EventType.Name(e.event_type).removeprefix("EVENT_TYPE_").lower(),
                e.agent,
            )
            for e in response.events
        ]
        return events, response.next_page_token

    async def pause(self, user: User, agent: Agent) -> str:
        request = reg.PauseAgentRequest(project_id=agent.project_id, id=agent.id)
        with _refusals():
            return _status((await self._registry.PauseAgent(request, metadata=bearer(user.token))).agent)

    async def resume(self, user: User, agent: Agent) -> str:
        request = reg.ResumeAgentRequest(project_id=agent.project_id, id=agent.id)
        with _refusals():
            return _status((await self._registry.ResumeAgent(request, metadata=bearer(user.token))).agent)

    async def terminate(self, user: User, agent: Agent) -> None:
        request = reg.DeleteAgentRequest(project_id=agent.project_id, id=agent.id)
        with _refusals():
            await self._registry.DeleteAgent(request, metadata=bearer(user.token))

    async def status(self, user: User, agent: Agent) -> str:
        request = reg.GetAgentRequest(project_id=agent.project_id, id=agent.id)
        with _refusals():
            return _status((await self._registry.GetAgent(request, metadata=bearer(user.token))).agent)


def _status(agent: resources_pb2.Agent) -> str:
    return resources_pb2.AgentStatus.Name(agent.status).removeprefix("AGENT_STATUS_").lower()


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """Turns a failed call into Refused."""
    try:
        yield
    except grpc.aio.AioRpcError as error:
        raise Refused(_BY_CODE.get(error.code(), Failure.OTHER), error.details() or "") from None
