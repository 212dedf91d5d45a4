"""Delegating to remote A2A agents (outbound): an agent's network may name an agent
outside the mesh, registered in its project by agent card URL with a write-only credential. The
delegation goes over A2A with the official a2a-sdk client and ends as a local one does — a
`ChildOutcome` the Delegator records as the one `delegation_response`.

The remote is resolved from the registry with this executor's system token (the one answer with
the credential, never logged). Every HTTP request carries the W3C trace context of the
delegation's span, so the remote's spans join the trace when it speaks OpenTelemetry. The
delegation's deadline bounds the call; cancelling the delegating run closes the stream and asks
the remote to cancel its task (best effort, detached from the cancellation). A task that stops
in input-required does not end the delegation: its question becomes the delegating run's request
for input (loops/remote_questions.py), and the answer continues the task (`answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from opentelemetry import propagate

from agentmesh.executor.context.events import EventOrigin, EventSink
from agentmesh.executor.delegation.a2a_events import INTERRUPTED, RemoteTaskStream, State
from agentmesh.executor.delegation.outcome import ChildOutcome
from agentmesh.executor.delegation.remote_card import CardUnavailable, fetch_card
from agentmesh.executor.durability.detached import run_detached
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.egress import EgressPolicy, EgressRefused
from agentmesh.runtime.egress_http import pinned_transport
from agentmesh.runtime.errors import DomainError

logger = logging.getLogger(__name__)

_MAX_WAITING = 10_000  # remote tasks remembered as waiting for an answer (the oldest go first)
_POLL_SECONDS = 0.5  # between `tasks/get` of a followed task whose remote does not stream
_MAX_REDIRECTS = 5  # followed when fetching a card (each one held to the egress policy)
# Awaited with the remote's task id and context id the moment it names the task (`run`).
TaskAccepted = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class RemoteEgress:
    """Where and how far the executor may go for a remote agent: every request keeps to `policy`;
    its card is read within `card_timeout_seconds` and `card_max_bytes`."""

    policy: EgressPolicy
    card_timeout_seconds: float = 10.0
    card_max_bytes: int = 1024 * 1024


class RemoteA2AAgents:
    """Runs a delegated task on a remote A2A agent of the delegating agent's project."""

    def __init__(
        self,
        registry: RegistryClient,
        *,
        system_metadata: Callable[[], Metadata | None],
        cleanup_timeout_seconds: float,
        egress: RemoteEgress,
    ) -> None:
        self._registry = registry
        self._system_metadata = system_metadata
        self._cleanup_timeout_seconds = cleanup_timeout_seconds
        self._egress = egress
        # (project, session, remote) → the remote task that stopped for authorization: the next
        # delegation to that remote in that session continues the task by its id. In this process
        # only: a run that moved executors starts a new task in the same context instead. (A task
        # that stops for input is answered by a person through the delegating run: `answer`.)
        self._waiting: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    async def run(
        self,
        *,
        project_id: str,
        name: str,
        task: str,
        origin: EventOrigin,
        sink: EventSink,
        timeout_seconds: float,
        on_task: TaskAccepted | None = None,
    ) -> ChildOutcome:
        """Sends `task` to the remote agent `name` in the A2A context of the session and waits
        for the task's end (within `timeout_seconds`), streaming its steps into `sink` as a
        worker's events from `origin` (see a2a_events.py). `on_task` is awaited once, the moment
        the remote names the task it made of the message (what a resumed run follows, `follow`)."""
        stream = RemoteTaskStream(origin)
        waiting = (project_id, origin.session_id, name)
        continues = self._waiting.pop(waiting, "")  # the answer to a remote task that asked

        async def send(client: Client, _streaming: bool) -> None:
            request = a2a_pb2.SendMessageRequest(
                message=a2a_pb2.Message(
                    message_id=uuid.uuid4().hex,
                    context_id=stream.origin.session_id,
                    task_id=continues,
                    role=a2a_pb2.Role.ROLE_USER,
                    parts=[a2a_pb2.Part(text=task)],
                )
            )
            async for response in client.send_message(request):
                known = stream.task_id
                await _feed(stream, sink, response)
                if on_task is not None and stream.task_id and not known:
                    await on_task(stream.task_id, stream.context_id)

        await sink.emit(stream.started())
        outcome = await self._talk(project_id, name, stream, timeout_seconds, send)
        return await self._finish(waiting, stream, sink, outcome)

    async def follow(
        self,
        *,
        project_id: str,
        name: str,
        task_id: str,
        origin: EventOrigin,
        sink: EventSink,
        timeout_seconds: float,
    ) -> ChildOutcome:
        """Follows the remote task `task_id`, sent before by a run that is now resumed, to its end
        (within `timeout_seconds`) without sending anything: `tasks/resubscribe` when the remote's
        card says it streams, else `tasks/get` every `_POLL_SECONDS`. Its steps stream into `sink`
        as `run`'s do."""
        stream = RemoteTaskStream(origin)
        stream.task_id = task_id

        async def watch(client: Client, streaming: bool) -> None:
            await _watch(client, streaming, stream, sink)

        await sink.emit(stream.started())
        outcome = await self._talk(project_id, name, stream, timeout_seconds, watch)
        return await self._finish((project_id, origin.session_id, name), stream, sink, outcome)

    async def answer(
        self,
        *,
        project_id: str,
        name: str,
        task_id: str,
        answer: str,
        origin: EventOrigin,
        sink: EventSink,
        timeout_seconds: float,
    ) -> ChildOutcome:
        """Answers the question the remote task `task_id` stopped with (input-required): the
        answer is the next message on that task (its task id and context id), and the task is
        followed to its end as `run` follows it — it may ask again. A task that no longer waits
        for input when the answer comes (it moved on, or ended) is sent nothing: it goes on from
        its current state (`tasks/get`)."""
        stream = RemoteTaskStream(origin)
        stream.task_id = task_id

        async def reply(client: Client, streaming: bool) -> None:
            task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            await _feed(stream, sink, a2a_pb2.StreamResponse(task=task))
            if stream.state == State.TASK_STATE_INPUT_REQUIRED:
                # What it says next is about the answer, not the question.
                stream.state, stream.message = State.TASK_STATE_WORKING, ""
                request = a2a_pb2.SendMessageRequest(
                    message=a2a_pb2.Message(
                        message_id=uuid.uuid4().hex,
                        context_id=stream.context_id,
                        task_id=task_id,
                        role=a2a_pb2.Role.ROLE_USER,
                        parts=[a2a_pb2.Part(text=answer)],
                    )
                )
                async for response in client.send_message(request):
                    await _feed(stream, sink, response)
            if stream.working:
                await _watch(client, streaming, stream, sink)

        await sink.emit(stream.started())
        outcome = await self._talk(project_id, name, stream, timeout_seconds, reply)
        return await self._finish((project_id, origin.session_id, name), stream, sink, outcome)

    async def cancel(self, *, project_id: str, name: str, task_id: str, origin: EventOrigin) -> None:
        """Asks the remote to cancel its task `task_id` (best effort: a remote that is away, or a
        task that ended, is left as it is)."""
        stream = RemoteTaskStream(origin)
        stream.task_id = task_id

        async def cancel(client: Client, _streaming: bool) -> None:
            with contextlib.suppress(A2AError, A2AClientError):
                await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))

        await self._talk(project_id, name, stream, self._cleanup_timeout_seconds, cancel)

    async def _finish(
        self, waiting: tuple[str, str, str], stream: RemoteTaskStream, sink: EventSink, outcome: ChildOutcome
    ) -> ChildOutcome:
        if outcome.code == INTERRUPTED[State.TASK_STATE_INPUT_REQUIRED] and stream.task_id:
            # The task waits for an answer, and has not ended (no end streams): the delegating
            # run asks its own caller, and the answer goes on with this task (`answer`).
            return ChildOutcome(question=outcome.message)
        if outcome.code in INTERRUPTED.values() and stream.task_id:
            self._waiting[waiting] = stream.task_id
            while len(self._waiting) > _MAX_WAITING:
                self._waiting.popitem(last=False)
        await sink.emit(stream.finished(outcome))
        return outcome

    async def _talk(
        self,
        project_id: str,
        name: str,
        stream: RemoteTaskStream,
        timeout_seconds: float,
        talk: Callable[[Client, bool], Awaitable[None]],
    ) -> ChildOutcome:
        """Resolves the remote, reads its card and lets `talk` speak to it (given the client and
        whether the card says the remote streams); how the task ended."""
        try:
            remote = await self._registry.resolve_remote_agent(
                project_id, name, metadata=self._system_metadata()
            )
        except DomainError as error:
            return ChildOutcome(code=error.code.name, message=error.message)
        headers = {"Authorization": f"Bearer {remote.credential}"} if remote.credential else {}
        egress = self._egress
        try:
            async with (
                asyncio.timeout(timeout_seconds),
                httpx.AsyncClient(
                    headers=headers,
                    timeout=timeout_seconds,
                    event_hooks={"request": [_trace]},
                    transport=pinned_transport(egress.policy, httpx),
                    max_redirects=_MAX_REDIRECTS,
                ) as http,
            ):
                card = await fetch_card(
                    http,
                    remote.card_url,
                    max_bytes=egress.card_max_bytes,
                    timeout_seconds=min(egress.card_timeout_seconds, timeout_seconds),
                )
                streaming = card.capabilities.streaming
                config = ClientConfig(
                    httpx_client=http,
                    streaming=streaming,
                    supported_protocol_bindings=[TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
                )
                client = ClientFactory(config).create(card)
                try:
                    await talk(client, streaming)
                except asyncio.CancelledError:
                    # Cancelled, or past the deadline: the remote task stops too.
                    if stream.task_id:
                        await self._cancel_detached(client, stream.task_id)
                    raise
                return stream.outcome()
        except TimeoutError:
            return ChildOutcome(
                code="DEADLINE_EXCEEDED", message=f"{name} did not answer within {timeout_seconds:g}s"
            )
        except CardUnavailable as error:
            return ChildOutcome(code="UNAVAILABLE", message=str(error))
        except (A2AError, A2AClientError, httpx.HTTPError, ValueError) as error:
            # The remote's own words, never the credential (httpx errors name the URL only); an
            # address the egress policy refused, as it says.
            logger.warning("delegation to remote agent %s failed: %s", name, type(error).__name__)
            said = _refusal(error) or error
            return ChildOutcome(code="UNAVAILABLE", message=f"{name} could not be reached over A2A: {said}")

    async def _cancel_detached(self, client: object, task_id: str) -> None:
        async def cancel() -> None:
            with contextlib.suppress(Exception):
                await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))  # type: ignore[attr-defined]

        with contextlib.suppress(BaseException):
            await run_detached(cancel, timeout_seconds=self._cleanup_timeout_seconds)


async def _watch(client: Client, streaming: bool, stream: RemoteTaskStream, sink: EventSink) -> None:
    """Follows the task `stream` names until it ends or stops to ask: `tasks/resubscribe` when
    the remote streams, else `tasks/get` every `_POLL_SECONDS`."""
    task_id = stream.task_id
    while True:
        task = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        await _feed(stream, sink, a2a_pb2.StreamResponse(task=task))
        if not stream.working:
            return
        if streaming:
            # A task that ended meanwhile is refused a subscription: `tasks/get` says how.
            with contextlib.suppress(A2AError, A2AClientError):
                async for response in client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id)):
                    await _feed(stream, sink, response)
            if not stream.working:
                return
        await asyncio.sleep(_POLL_SECONDS)


def _refusal(error: BaseException | None) -> EgressRefused | None:
    """The egress refusal an error of the A2A client stems from, if it does."""
    while error is not None and not isinstance(error, EgressRefused):
        error = error.__cause__ or error.__context__
    return error


async def _feed(stream: RemoteTaskStream, sink: EventSink, response: a2a_pb2.StreamResponse) -> None:
    for event in stream.feed(response):
        await sink.emit(event)


async def _trace(request: httpx.Request) -> None:
    """W3C trace context on every request to the remote agent (the current span's)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    request.headers.update(carrier)
