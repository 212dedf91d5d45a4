"""The gateway's rules for chatting with agents, shared by its gRPC and HTTP faces: which executor
runs a chat, how a refused run fails over, and what the caller sees of it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator

import grpc

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import ExecutorBusy, ExecutorClient, ExecutorPool
from agentmesh.executor.v1 import executor_service_pb2
from agentmesh.gateway.errors import ExecutorsBusy, InvalidRequest, MessageTooLarge, NoExecutor
from agentmesh.gateway.models import AgentRef, Caller, ChatResult
from agentmesh.runtime.errors import DomainError, error_for_code, from_status_proto

logger = logging.getLogger(__name__)

# An executor that answers with one of these has not started the run: another may take it.
_BUSY = ExecutorBusy.default_reason
_FAILOVER_CODES = {grpc.StatusCode.UNAVAILABLE}
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class ChatGateway:
    """Routes chats to executors: session affinity (the pool ranks executors per session),
    failover while nothing has reached the caller, push-back when every executor is busy."""

    def __init__(self, *, executors: ExecutorPool, max_message_bytes: int, timeout_seconds: float) -> None:
        self._executors = executors
        self._max_message_bytes = max_message_bytes
        self._timeout_seconds = timeout_seconds

    async def cancel_agent_runs(self, caller: Caller, project_id: str, agent_id: str, *, reason: str) -> int:
        """Cancels the agent's runs in flight on every executor (a terminated agent's work stops,
        the runs below it too); how many were cancelled. Best effort: an executor that cannot be
        reached is logged and skipped — its runs cannot be in flight on a dead executor."""

        async def cancel(address: str, client: ExecutorClient) -> int:
            try:
                return await client.cancel_runs(project_id, agent_id, reason=reason, metadata=caller.metadata)
            except DomainError as error:
                logger.warning(
                    "could not cancel runs of agent %s on %s: %s", agent_id, address, error.message
                )
                return 0

        counts = await asyncio.gather(
            *(cancel(address, client) for address, client in self._executors.clients())
        )
        return sum(counts)

    def new_session_id(self) -> str:
        return uuid.uuid4().hex

    def session_id(self, requested: str | None) -> str:
        """The session a chat runs in: the one the client named (validated), else a new one."""
        if not requested:
            return self.new_session_id()
        if not _SESSION_ID.match(requested):
            raise InvalidRequest.field(
                "session_id", "1-128 characters: letters, digits, '.', '_', ':' or '-', starting alphanumeric"
            )
        return requested

    def check_message(self, message: str, *, field: str = "message") -> None:
        if not message:
            raise InvalidRequest.field(field, "is required")
        if len(message.encode()) > self._max_message_bytes:
            raise MessageTooLarge(field, self._max_message_bytes)

    async def stream_chat(
        self, caller: Caller, agent: AgentRef, message: str, session_id: str
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """Every event of the run, the sub-agents' included. Raises a DomainError when the run
        cannot start; leaving the iteration early cancels the run below."""
        self.check_message(message)
        request = executor_service_pb2.RunRequest(
            project_slug=agent.project_slug, agent_name=agent.agent_name, session_id=session_id, input=message
        )
        candidates = self._executors.candidates(session_id)
        if not candidates:
            raise NoExecutor("no executor is available")
        refusals: list[DomainError] = []
        for address, client in candidates:
            started = False
            run = client.run(request, timeout=self._timeout_seconds, metadata=caller.metadata)
            try:
                async with contextlib.aclosing(run):  # leaving early cancels the run below at once
                    async for event in run:
                        started = True
                        yield event
                return
            except DomainError as error:
                # Fail over only while nothing reached the caller: a started run is not retried.
                if started or not _refused(error):
                    raise
                logger.warning("executor %s refused a run (%s); trying the next", address, error.reason)
                if error.code in _FAILOVER_CODES:
                    self._executors.mark(address, healthy=False)
                refusals.append(error)
        if any(error.reason == _BUSY for error in refusals):
            raise ExecutorsBusy()
        raise NoExecutor(f"no executor could take the run: {refusals[-1].message}")

    async def chat(self, caller: Caller, agent: AgentRef, message: str, session_id: str) -> ChatResult:
        """Runs a chat to its end and returns the addressed agent's answer."""
        result = ChatResult(session_id=session_id)
        async for event in self.stream_chat(caller, agent, message, session_id):
            if not result.run_id:
                result.run_id = event.run_id  # the first event opens the addressed agent's run
            if event.run_id != result.run_id:
                continue  # a sub-agent's or a delegated worker's step
            if event.HasField("run_completed"):
                completed = event.run_completed
                result.content = completed.content
                result.usage = completed.usage
                result.max_steps_reached = completed.max_steps_reached
            elif event.HasField("run_failed"):
                raise run_failure(event.run_failed)
        return result


def _refused(error: DomainError) -> bool:
    return error.reason == _BUSY or error.code in _FAILOVER_CODES


def run_failure(failed: run_pb2.RunFailed) -> DomainError:
    """The DomainError for a run that ended with RunFailed: the one its status stands for (code,
    reason, details), or, from an executor that sends no status, one made from the code name."""
    if failed.HasField("status"):
        return from_status_proto(failed.status)
    code = getattr(grpc.StatusCode, failed.code, grpc.StatusCode.INTERNAL)
    return error_for_code(code)(failed.message or failed.code, reason=f"RUN_{failed.code or 'FAILED'}")


class AnswerStream:
    """Picks the addressed agent's answer text out of a run's events as they stream.

    Only the addressed run's text counts (never a sub-agent's or a delegated worker's), and
    fenced ```delegate / ```tool_call blocks — step markers for models without function calling —
    are held back and dropped. Text streams as it comes; `finish` returns what is still missing
    of the final answer (all of it for workflow agents, whose answer arrives only with
    RunCompleted).
    """

    _MARKERS = ("delegate", "tool_call")
    _FENCE = "```"
    _STEP_SEPARATOR = "\n\n"

    def __init__(self) -> None:
        self.run_id = ""
        self.sent = ""  # everything released so far
        self._step_sent = ""  # released during the current model step
        self._pending = ""  # text of the current step not yet released

    def feed(self, event: run_pb2.RunEvent) -> str:
        """The text to send for this event ("" when none)."""
        if not self.run_id:
            self.run_id = event.run_id
        if event.run_id != self.run_id:
            return ""
        if event.HasField("step_started"):
            self._pending = ""
            self._step_sent = ""
            return ""
        if not event.HasField("text_delta"):
            return ""
        self._pending += event.text_delta.text
        return self._emit(self._release())

    def finish(self, content: str) -> str:
        """The rest of the final answer `content` that the caller has not seen yet. The answer
        may differ from the streamed text by surrounding whitespace only."""
        said, answer = self._step_sent.strip(), content.strip()
        if answer.startswith(said):
            return self._emit(answer[len(said) :])
        self._step_sent = ""  # the answer is not what this step streamed: send it whole
        return self._emit(answer)

    def _emit(self, text: str) -> str:
        if not text:
            return ""
        # An earlier step already said something: keep the steps apart.
        prefix = self._STEP_SEPARATOR if self.sent and not self._step_sent else ""
        self._step_sent += text
        self.sent += prefix + text
        return prefix + text

    def _release(self) -> str:
        out: list[str] = []
        while self._pending:
            start = self._pending.find(self._FENCE)
            if start < 0:
                # Keep a trailing "`" or "``": it may open a fence with the next chunk.
                keep = len(self._pending) - len(self._pending.rstrip("`"))
                cut = len(self._pending) - keep
                out.append(self._pending[:cut])
                self._pending = self._pending[cut:]
                break
            out.append(self._pending[:start])
            self._pending = self._pending[start:]
            end = self._pending.find(self._FENCE, len(self._FENCE))
            if end < 0:
                break  # the fence is still open: wait for the rest of the block
            block = self._pending[: end + len(self._FENCE)]
            self._pending = self._pending[end + len(self._FENCE) :]
            info = block[len(self._FENCE) :].split("\n", 1)[0].strip()
            if info not in self._MARKERS:
                out.append(block)
        return "".join(out)
