"""The gateway's rules for chatting with agents, shared by its gRPC and HTTP faces: who may chat,
which executor runs the chat, and what the caller sees of it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import ExecutorPool
from agentmesh.executor.v1 import executor_service_pb2
from agentmesh.runtime.errors import (
    DomainError,
    FieldViolation,
    InvalidArgument,
    ResourceExhausted,
    Unavailable,
    error_for_code,
)
from agentmesh.runtime.identity import Principal

logger = logging.getLogger(__name__)

_FAILOVER_REASONS = {"UNAVAILABLE", "EXECUTOR_BUSY"}


@dataclass(frozen=True)
class AgentRef:
    project_slug: str
    agent_name: str

    @classmethod
    def parse(cls, text: str, *, field: str = "agent") -> AgentRef:
        project, slash, agent = text.partition("/")
        if not slash or not project or not agent or "/" in agent:
            raise InvalidArgument(
                f"{field} must be 'project_slug/agent_name', got {text!r}",
                violations=[FieldViolation(field, "must be 'project_slug/agent_name'")],
            )
        return cls(project, agent)

    def __str__(self) -> str:
        return f"{self.project_slug}/{self.agent_name}"


@dataclass
class ChatResult:
    session_id: str
    run_id: str = ""
    content: str = ""
    usage: run_pb2.Usage | None = None


class ChatGateway:
    """Routes chats to executors: session affinity, failover before the first event, limits."""

    def __init__(self, *, executors: ExecutorPool, max_message_bytes: int, timeout_seconds: float) -> None:
        self._executors = executors
        self._max_message_bytes = max_message_bytes
        self._timeout_seconds = timeout_seconds

    def new_session_id(self) -> str:
        return uuid.uuid4().hex

    async def stream_chat(
        self, principal: Principal, agent: AgentRef, message: str, session_id: str
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """The run's events. Raises a DomainError when the run cannot start or fails."""
        if not message:
            raise InvalidArgument(
                "message is required", violations=[FieldViolation("message", "is required")]
            )
        if len(message.encode()) > self._max_message_bytes:
            raise ResourceExhausted(
                f"message is larger than {self._max_message_bytes} bytes",
                reason="MESSAGE_TOO_LARGE",
                violations=[FieldViolation("message", f"at most {self._max_message_bytes} bytes")],
            )
        request = executor_service_pb2.RunRequest(
            project_slug=agent.project_slug, agent_name=agent.agent_name, session_id=session_id, input=message
        )
        candidates = self._executors.candidates(session_id)
        if not candidates:
            raise Unavailable("no executor is configured", reason="NO_EXECUTOR")
        last_error: DomainError | None = None
        for address, client in candidates:
            started = False
            try:
                async for event in client.run(request, timeout=self._timeout_seconds):
                    started = True
                    yield event
                return
            except DomainError as error:
                # Fail over only while nothing reached the caller: a started run is not retried.
                if started or error.reason not in _FAILOVER_REASONS:
                    raise
                logger.warning("executor %s refused a run (%s); trying the next", address, error.reason)
                self._executors.mark(address, healthy=error.reason != "UNAVAILABLE")
                last_error = error
        assert last_error is not None
        raise last_error

    async def chat(self, principal: Principal, agent: AgentRef, message: str, session_id: str) -> ChatResult:
        """Runs a chat to its end and returns the addressed agent's answer."""
        result = ChatResult(session_id=session_id)
        async for event in self.stream_chat(principal, agent, message, session_id):
            if event.delegation_path:
                continue
            result.run_id = event.run_id
            if event.HasField("run_completed"):
                result.content = event.run_completed.content
                result.usage = event.run_completed.usage
            elif event.HasField("run_failed"):
                raise run_failure(event.run_failed)
        return result


def run_failure(failed: run_pb2.RunFailed) -> DomainError:
    """The DomainError for a run that ended with RunFailed."""
    code = getattr(grpc.StatusCode, failed.code, grpc.StatusCode.INTERNAL)
    return error_for_code(code)(failed.message or failed.code, reason=f"RUN_{failed.code or 'FAILED'}")
