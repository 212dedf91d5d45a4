"""Delegating to remote A2A agents (issue 19, outbound): an agent's network may name an agent
outside the mesh, registered in its project by agent card URL with a write-only credential. The
delegation goes over A2A with the official a2a-sdk client and ends as a local one does — a
`ChildOutcome` the Delegator records as the one `delegation_response`.

The remote is resolved from the registry with this executor's system token (the one answer with
the credential, never logged). Every HTTP request carries the W3C trace context of the
delegation's span, so the remote's spans join the trace when it speaks OpenTelemetry. The
delegation's deadline bounds the call; cancelling the delegating run closes the stream and asks
the remote to cancel its task (best effort, detached from the cancellation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

import httpx
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.types import a2a_pb2
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from opentelemetry import propagate

from agentmesh.executor.delegation import ChildOutcome
from agentmesh.executor.detached import run_detached
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError

logger = logging.getLogger(__name__)

State = a2a_pb2.TaskState
_FAILED = {
    State.TASK_STATE_FAILED: "INTERNAL",
    State.TASK_STATE_CANCELED: "CANCELLED",
    State.TASK_STATE_REJECTED: "FAILED_PRECONDITION",
    State.TASK_STATE_AUTH_REQUIRED: "UNAUTHENTICATED",
    State.TASK_STATE_INPUT_REQUIRED: "FAILED_PRECONDITION",
}


class RemoteA2AAgents:
    """Runs a delegated task on a remote A2A agent of the delegating agent's project."""

    def __init__(
        self,
        registry: RegistryClient,
        *,
        system_metadata: Callable[[], Metadata | None],
        cleanup_timeout_seconds: float,
    ) -> None:
        self._registry = registry
        self._system_metadata = system_metadata
        self._cleanup_timeout_seconds = cleanup_timeout_seconds

    async def run(
        self, *, project_id: str, name: str, task: str, context_id: str, timeout_seconds: float
    ) -> ChildOutcome:
        """Sends `task` to the remote agent `name` in the A2A context `context_id` and waits
        for the task's end (within `timeout_seconds`)."""
        try:
            remote = await self._registry.resolve_remote_agent(
                project_id, name, metadata=self._system_metadata()
            )
        except DomainError as error:
            return ChildOutcome(code=error.code.name, message=error.message)
        headers = {"Authorization": f"Bearer {remote.credential}"} if remote.credential else {}
        task_id = ""
        try:
            async with (
                asyncio.timeout(timeout_seconds),
                httpx.AsyncClient(
                    headers=headers, timeout=timeout_seconds, event_hooks={"request": [_trace]}
                ) as http,
            ):
                card = await A2ACardResolver(http, remote.card_url, agent_card_path="").get_agent_card()
                config = ClientConfig(
                    httpx_client=http,
                    streaming=card.capabilities.streaming,
                    supported_protocol_bindings=[TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
                )
                client = ClientFactory(config).create(card)
                request = a2a_pb2.SendMessageRequest(
                    message=a2a_pb2.Message(
                        message_id=uuid.uuid4().hex,
                        context_id=context_id,
                        role=a2a_pb2.Role.ROLE_USER,
                        parts=[a2a_pb2.Part(text=task)],
                    )
                )
                outcome = _Collected()
                try:
                    async for response in client.send_message(request):
                        task_id = outcome.feed(response) or task_id
                except asyncio.CancelledError:
                    if task_id:
                        await self._cancel_detached(client, task_id)
                    raise
                return outcome.result()
        except TimeoutError:
            return ChildOutcome(
                code="DEADLINE_EXCEEDED", message=f"{name} did not answer within {timeout_seconds:g}s"
            )
        except (A2AError, A2AClientError, httpx.HTTPError, ValueError) as error:
            # The remote's own words, never the credential (httpx errors name the URL only).
            logger.warning("delegation to remote agent %s failed: %s", name, type(error).__name__)
            return ChildOutcome(code="UNAVAILABLE", message=f"{name} could not be reached over A2A: {error}")

    async def _cancel_detached(self, client: object, task_id: str) -> None:
        async def cancel() -> None:
            with contextlib.suppress(Exception):
                await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))  # type: ignore[attr-defined]

        with contextlib.suppress(BaseException):
            await run_detached(cancel, timeout_seconds=self._cleanup_timeout_seconds)


class _Collected:
    """What a remote task's responses add up to: its latest state and its answer text."""

    def __init__(self) -> None:
        self.state: a2a_pb2.TaskState.ValueType = State.TASK_STATE_SUBMITTED
        self.artifacts: dict[str, str] = {}
        self.message = ""

    def feed(self, response: a2a_pb2.StreamResponse) -> str:
        """Takes one response; the task's id when it tells one."""
        if response.HasField("message"):  # an answer without a task
            self.state = State.TASK_STATE_COMPLETED
            self.message = _text(response.message.parts)
            return ""
        if response.HasField("task"):
            task = response.task
            self.state = task.status.state
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = _text(artifact.parts)
            self.message = _text(task.status.message.parts) or self.message
            return task.id
        if response.HasField("artifact_update"):
            update = response.artifact_update
            before = self.artifacts.get(update.artifact.artifact_id, "") if update.append else ""
            self.artifacts[update.artifact.artifact_id] = before + _text(update.artifact.parts)
            return update.task_id
        if response.HasField("status_update"):
            update = response.status_update
            self.state = update.status.state
            self.message = _text(update.status.message.parts) or self.message
            return update.task_id
        return ""

    def result(self) -> ChildOutcome:
        answer = "\n".join(text for text in self.artifacts.values() if text) or self.message
        if self.state == State.TASK_STATE_COMPLETED:
            return ChildOutcome(completed=True, content=answer)
        code = _FAILED.get(self.state, "INTERNAL")
        return ChildOutcome(code=code, message=self.message or State.Name(self.state))


def _text(parts: object) -> str:
    return "".join(part.text for part in parts if part.WhichOneof("content") == "text")  # type: ignore[attr-defined]


async def _trace(request: httpx.Request) -> None:
    """W3C trace context on every request to the remote agent (the current span's)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    request.headers.update(carrier)
