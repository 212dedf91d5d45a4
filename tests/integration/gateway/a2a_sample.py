"""An a2a-sdk sample server on loopback, the remote A2A agent of the outbound tests: the SDK's own
request handler and JSON-RPC routes in front of an agent whose behaviour the test picks by the
task it sends (see `ScriptedAgent`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.applications import Starlette

from tests.polling import eventually

STREAM = "stream the greeting"
ASK = "ask me something"
ASK_TWICE = "ask me two things"
HOLD = "hold until cancelled"


@dataclass
class ScriptedAgent(AgentExecutor):
    """The remote agent. By the task's text:

    - `STREAM`: a task that says it is working, sends the answer in two artifact chunks and
      waits after the first until the test sets `release` (so the test sees the first chunk in
      the delegating run's stream before the remote has finished), then completes;
    - `ASK`: a task that stops in `input-required` with a question; a message that continues it
      (its task id) completes it with thanks naming the answer (`answers` records the task id
      and the text of each such message);
    - `ASK_TWICE`: as `ASK`, but the first answer is followed by a second question on the same
      task, and the thanks name both answers;
    - `HOLD`: a task that works until it is cancelled (`cancelled` records the task ids);
    - anything else: a direct message answer (no task), echoing the task.

    It keeps the headers of every request it served."""

    seen_headers: list[dict[str, str]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: list[str] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.seen_headers.append(dict(context.call_context.state.get("headers", {})))
        text = context.get_user_input()
        current = context.current_task
        if current is not None and current.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED:
            # The answer to the question: the same task goes on and completes.
            self.answers.append((current.id, text))
            given = [answer for task_id, answer in self.answers if task_id == current.id]
            updater = TaskUpdater(event_queue, current.id, current.context_id)
            first = current.history[0].parts[0].text if current.history else ""
            if first == ASK_TWICE and len(given) == 1:
                await updater.requires_input(self._message(context, "And which city?"))
                return
            await updater.complete(self._message(context, f"thanks, in the dialect of {' '.join(given)}"))
            return
        if text not in (STREAM, ASK, ASK_TWICE, HOLD):
            await event_queue.enqueue_event(self._message(context, f"remote says: bonjour ({text})"))
            return
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(
            a2a_pb2.Task(
                id=task_id,
                context_id=context_id,
                status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_SUBMITTED),
                history=[context.message] if context.message else [],
            )
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work(self._message(context, "looking it up"))
        if text in (ASK, ASK_TWICE):
            await updater.requires_input(self._message(context, "Which dialect of French?"))
        elif text == HOLD:
            await asyncio.Event().wait()  # until the handler cancels this execution
        else:
            await updater.add_artifact([a2a_pb2.Part(text="bon")], artifact_id="greeting")
            await self.release.wait()
            await updater.add_artifact([a2a_pb2.Part(text="jour")], artifact_id="greeting", append=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.append(context.task_id or "")
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()

    @staticmethod
    def _message(context: RequestContext, text: str) -> a2a_pb2.Message:
        return a2a_pb2.Message(
            message_id=f"m-{len(text)}-{text[:6]}",
            context_id=context.context_id or "",
            task_id=context.task_id or "",
            role=a2a_pb2.Role.ROLE_AGENT,
            parts=[a2a_pb2.Part(text=text)],
        )


@dataclass
class SampleServer:
    url: str  # its agent card's
    agent: ScriptedAgent


@asynccontextmanager
async def sample_server(*, name: str = "translator", streaming: bool = True) -> AsyncIterator[SampleServer]:
    """Serves a `ScriptedAgent` on an ephemeral loopback port; its card says whether it streams."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    card = a2a_pb2.AgentCard(
        name=name,
        description="translates",
        version="1",
        supported_interfaces=[
            a2a_pb2.AgentInterface(
                url=url + "/rpc",
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=a2a_pb2.AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            a2a_pb2.AgentSkill(id="translate", name="translate", description="translates", tags=["text"])
        ],
    )
    agent = ScriptedAgent()
    handler = DefaultRequestHandler(agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/rpc")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))

    async def started() -> bool:
        return server.started

    await eventually(started, what="the sample A2A server to start")
    try:
        yield SampleServer(url + "/.well-known/agent-card.json", agent)
    finally:
        agent.release.set()
        server.should_exit = True
        await serving


async def send_on_task(
    remote: SampleServer, task_id: str, context_id: str, text: str
) -> a2a_pb2.TaskState.ValueType:
    """Sends `text` as the next message on the remote's task `task_id`, as another client of the
    remote would (not through the mesh); the task's state after it."""
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, remote.url, agent_card_path="").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        message = a2a_pb2.Message(
            message_id=f"direct-{task_id}",
            context_id=context_id,
            task_id=task_id,
            role=a2a_pb2.Role.ROLE_USER,
            parts=[a2a_pb2.Part(text=text)],
        )
        async for response in client.send_message(a2a_pb2.SendMessageRequest(message=message)):
            return response.task.status.state
    raise AssertionError("the remote answered nothing")
