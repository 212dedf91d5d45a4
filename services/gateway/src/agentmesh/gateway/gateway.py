"""The gateway's core: what its faces (public gRPC, REST/JSON, OpenAI-compatible HTTP) do with
agents, written once — chatting (streamed or whole), terminating an agent with its runs in
flight, deleting a project with its sessions, and paging a project's sessions and their events.
Domain and proto messages in, domain and proto messages out; no transport: the faces are thin
adapters over `AgentGateway`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import FOLLOWED_IN_LOG, RunNotPlaced, RunRouter
from agentmesh.gateway.answers import response_from_text
from agentmesh.gateway.budget import current_budget
from agentmesh.gateway.chat_stream import ChatStream, chat_of_log, from_run_started
from agentmesh.gateway.errors import (
    ExecutorsBusy,
    InvalidParameterValue,
    InvalidRequest,
    MessageTooLarge,
    NoExecutor,
)
from agentmesh.gateway.models import AgentRef, Caller, ChatResult
from agentmesh.gateway.resume import follow_run, still_waiting, top_run_of
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.client import MemoryClient, SessionNotFound
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.runtime.client import unary
from agentmesh.runtime.errors import DomainError, Internal, InvalidArgument, NotFound

logger = logging.getLogger(__name__)

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
# How long a stream that followed a run to its suspension waits for the registry to hold its
# requests (a run whose executor died before it parked parks once taken over, within a lease).
PARK_WAIT_SECONDS = 30.0
# What a message for a session whose run is in flight does (the executor and registry apply it).
DOUBLE_TEXTING_POLICIES = ("reject", "enqueue", "interrupt")


def check_double_texting(policy: str | None) -> None:
    """A per-message double-texting policy is one of DOUBLE_TEXTING_POLICIES (or unset)."""
    if policy and policy not in DOUBLE_TEXTING_POLICIES:
        raise InvalidRequest.field("double_texting", f"must be one of {', '.join(DOUBLE_TEXTING_POLICIES)}")


def check_model_settings(settings: run_pb2.ModelSettings, *, prefix: str = "model_settings.") -> None:
    """Per-message model settings within their ranges; the error names the field (`prefix` is
    how the face spells where they sit: `model_settings.` on gRPC, nothing on OpenAI's API)."""
    if settings.HasField("temperature") and not 0 <= settings.temperature <= 2:
        raise InvalidRequest.field(prefix + "temperature", "must be between 0 and 2")
    if settings.HasField("max_tokens") and settings.max_tokens < 1:
        raise InvalidRequest.field(prefix + "max_tokens", "must be at least 1")
    if settings.reasoning_effort and settings.reasoning_effort not in REASONING_EFFORTS:
        raise InvalidRequest.field(
            prefix + "reasoning_effort", f"must be one of {', '.join(REASONING_EFFORTS)}"
        )


class AgentGateway:
    """The gateway's operations on agents, whatever face they arrive by.

    Chats go to executors through the RunRouter (session affinity, failover while nothing has
    reached the caller); when every executor is busy the caller is told to retry. Every call to
    another service is made as the caller, with its token.
    """

    def __init__(
        self,
        *,
        router: RunRouter,
        registry: RegistryClient,
        memory: MemoryClient,
        max_message_bytes: int,
        timeout_seconds: float,
    ) -> None:
        self._router = router
        self._registry = registry
        self._memory = memory
        self._max_message_bytes = max_message_bytes
        self._timeout_seconds = timeout_seconds

    # Chat.

    def new_session_id(self) -> str:
        return uuid.uuid4().hex

    def session_id(self, requested: str | None, *, field: str = "session_id") -> str:
        """The session a chat runs in: the one the client named in `field` (validated), else a
        new one."""
        if not requested:
            return self.new_session_id()
        if not self.is_session_id(requested):
            raise InvalidRequest.field(
                field, "1-128 characters: letters, digits, '.', '_', ':' or '-', starting alphanumeric"
            )
        return requested

    @staticmethod
    def is_session_id(text: str) -> bool:
        """Whether a client may name a session so (a chat refuses any other name)."""
        return _SESSION_ID.match(text) is not None

    def check_message(self, message: str, *, field: str = "message") -> None:
        if not message:
            raise InvalidRequest.field(field, "is required")
        if len(message.encode()) > self._max_message_bytes:
            raise MessageTooLarge(field, self._max_message_bytes)

    async def start_chat(
        self,
        caller: Caller,
        agent: AgentRef,
        message: str,
        session_id: str,
        *,
        model_settings: run_pb2.ModelSettings | None = None,
        double_texting: str = "",
        context: Sequence[executor_service_pb2.ContextMessage] = (),
        response_format: executor_service_pb2.ResponseFormat | None = None,
        client_tools: Sequence[executor_service_pb2.ClientTool] = (),
        client_tool_choice: str = "",
    ) -> ChatStream:
        """Starts a chat and returns it once its run has started, so a chat that cannot start
        raises its DomainError before a face has sent anything. `model_settings` apply to this
        message's run only, `double_texting` (when set) overrides the agent's policy for it: a
        session's earlier message still running makes it wait (enqueue), cancels that run
        (interrupt), or refuses it with ABORTED SESSION_BUSY (reject). `context` is the
        conversation a client that keeps no session sent before `message`: the run's context
        before the session's history; `response_format` the shape its answer must have;
        `client_tools` the tools the client runs (and `client_tool_choice` which one the model
        must call): a call of one suspends the run until the client's result answers it."""
        check_double_texting(double_texting)
        request = executor_service_pb2.RunRequest(
            project_slug=agent.project_slug,
            agent_name=agent.agent_name,
            session_id=session_id,
            input=message,
            model_settings=model_settings,
            double_texting=double_texting,
            context=context,
            response_format=response_format,
            budget=current_budget.get(),
            client_tools=client_tools,
            client_tool_choice=client_tool_choice,
        )
        events = self._events(caller, request)
        try:
            first = await anext(events, None)
        except DomainError as error:
            await events.aclose()
            run_id = error.metadata.get("run_id", "")
            if error.reason not in FOLLOWED_IN_LOG or not run_id:
                raise
            # Given up by its executor before any event of it arrived (handed over, or its lease
            # lost): it goes on from the log, and so does the chat.
            logger.warning("run %s moved before it started here (%s): following it in the log", run_id, error)
            log = await self.resume_chat(caller, agent, session_id, after_seq=0, run_id=run_id)
            events = from_run_started(log, run_id)
            try:
                first = await anext(events, None)
            except BaseException:
                await events.aclose()
                raise
            if first is None:
                raise
        except BaseException:
            await events.aclose()
            raise
        if first is None:
            raise Internal("the run ended before it started")
        run_id = first.run_id

        def resume(after_seq: int) -> Awaitable[AsyncIterator[run_pb2.RunEvent]]:
            return self.resume_chat(caller, agent, session_id, after_seq=after_seq, run_id=run_id)

        return ChatStream(session_id, first, events, resume=resume)

    async def chat(
        self,
        caller: Caller,
        agent: AgentRef,
        message: str,
        session_id: str,
        *,
        model_settings: run_pb2.ModelSettings | None = None,
        double_texting: str = "",
    ) -> ChatResult:
        """Runs a chat to its end and returns the addressed agent's answer."""
        stream = await self.start_chat(
            caller, agent, message, session_id, model_settings=model_settings, double_texting=double_texting
        )
        return await stream.result_at_end()

    async def resume_chat(
        self, caller: Caller, agent: AgentRef, session_id: str, *, after_seq: int, run_id: str = ""
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """The rest of a chat whose stream broke, from the session's log (resume.py): what was
        recorded after `after_seq`, until the run's final event. The session must be one of the
        agent's project (else not found, as for any session the caller may not see)."""
        if after_seq < 0:
            raise InvalidRequest.field("resume_after_seq", "must not be negative")
        if not session_id:
            raise InvalidRequest.field("session_id", "is required to resume a chat")
        spec = await self._registry.resolve_agent(
            agent.project_slug, agent.agent_name, metadata=caller.metadata
        )
        await self.check_session(caller, spec.agent.project_id, session_id)
        project_id = spec.agent.project_id
        return follow_run(
            self._memory,
            session_id,
            project_id=project_id,
            after_seq=after_seq,
            run_id=run_id,
            metadata=caller.metadata,
            parked=lambda ids: self._parked(caller, project_id, ids),
        )

    async def cancel_waiting_run(
        self, caller: Caller, project_id: str, request_id: str, *, reason: str = ""
    ) -> list[str]:
        """Cancels the session's run that waits for a pending request (the registry's
        CancelWaitingRun, as the caller): the runs cancelled, top first. FailedPrecondition when
        the request is not pending any more."""
        cancelled = await self._registry.cancel_waiting_run(
            project_id, request_id, reason=reason, metadata=caller.metadata
        )
        return list(cancelled.run_ids)

    async def respond_to_input(
        self, caller: Caller, project_id: str, request_id: str, response: run_pb2.InputResponse
    ) -> AsyncIterator[run_pb2.RunEvent]:
        """Gives a suspended run's request its one response (the registry decides whether it
        counts: a refusal raises before anything streams), then the run's events from the log
        as it resumes (resume.py) — until its end, or its next suspension; at once the requests
        it still waits for (`input_requested`) and `run_suspended` when others are pending."""
        if not project_id:
            raise InvalidRequest.field("project_id", "is required")
        if not request_id:
            raise InvalidRequest.field("id", "is required")
        answered = await self._registry.respond_to_input_request(
            project_id, request_id, response, metadata=caller.metadata
        )
        # Still waiting only for requests raised before this response: one the resumed run raised
        # since is its next suspension, which the log shows as the followed run's.
        responded = answered.response.responded_at.ToNanoseconds()
        pending = [
            request
            for request in await self.pending_requests(
                caller, project_id, answered.session_id, run_id=answered.run_id
            )
            if request.created_at.ToNanoseconds() <= responded
        ]
        if pending:
            return still_waiting(answered, pending)
        resumed = follow_run(
            self._memory,
            answered.session_id,
            project_id=project_id,
            after_seq=answered.seq,
            run_id=answered.run_id,
            metadata=caller.metadata,
            parked=lambda ids: self._parked(caller, project_id, ids),
            to_top=True,
        )
        return resumed

    async def _parked(self, caller: Caller, project_id: str, request_ids: list[str]) -> None:
        """Waits (boundedly) until the registry holds these requests: a run records its requests
        before it parks with them (and, should its executor die in between, parks with them once
        it is taken over, within a lease time)."""
        deadline = asyncio.get_running_loop().time() + PARK_WAIT_SECONDS
        pause = 0.01
        for request_id in request_ids:
            while True:
                try:
                    await self._registry.get_input_request(project_id, request_id, metadata=caller.metadata)
                    break
                except NotFound:
                    if asyncio.get_running_loop().time() > deadline:
                        logger.warning("request %s is not at the registry yet; streaming on", request_id)
                        return
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.5)

    async def pending_requests(
        self, caller: Caller, project_id: str, session_id: str, *, run_id: str = "", agent: str = ""
    ) -> list[run_pb2.InputRequest]:
        """The session's requests for input still waiting for their response, oldest first;
        only `run_id`'s, or only those of the agent of slug `agent`'s runs, when given: those it
        asked, and those the runs it delegated to asked (their path starts with it)."""
        pending: list[run_pb2.InputRequest] = []
        page_token = ""
        while True:
            page = await self._registry.list_input_requests(
                project_id,
                session_id=session_id,
                page_size=1000,
                page_token=page_token,
                metadata=caller.metadata,
            )
            pending += [
                request
                for request in page.input_requests
                if (not run_id or request.run_id == run_id)
                and (not agent or agent in (request.agent, *request.delegation_path[:1]))
            ]
            page_token = page.next_page_token
            if not page_token:
                return pending

    async def answer_chat(
        self, caller: Caller, agent: AgentRef, session_id: str, message: str, *, field: str = "message"
    ) -> ChatStream | None:
        """A chat message that answers a request instead of starting a run (the faces that carry
        only messages: A2A, OpenAI-compatible): when the agent's run in the session waits for
        input, `message` is the response to its oldest pending request (answers.py) and the chat
        is the resumed run, followed in the log to its end or its next suspension. None when
        nothing of the agent's waits there."""
        if not session_id:
            return None
        spec = await self._registry.resolve_agent(
            agent.project_slug, agent.agent_name, metadata=caller.metadata
        )
        project_id = spec.agent.project_id
        pending = await self.pending_requests(caller, project_id, session_id, agent=spec.agent.slug)
        if not pending:
            return None
        # A message answers a person's request, oldest first; a client tool call only when nothing
        # else waits (refused: its result comes as a tool message).
        request = next((r for r in pending if r.kind != run_pb2.INPUT_KIND_CLIENT_TOOL), pending[0])
        response = response_from_text(request, message, field=field)
        run_id = request.run_id
        if request.delegation_path:  # a delegated run's request: the chat is its top-level run's
            run_id = await top_run_of(
                self._memory, session_id, run_id, project_id=project_id, metadata=caller.metadata
            )
        events = await self.respond_to_input(caller, project_id, request.id, response)
        return await chat_of_log(session_id, run_id, events)

    async def answer_tool_calls(
        self, caller: Caller, agent: AgentRef, session_id: str, results: Sequence[tuple[str, str, str]]
    ) -> ChatStream:
        """A client's results of the tool calls its chat returned — each the call's id (its request
        for input's), the tool's output, and where the request holds the id — as their requests'
        answers; the chat is the run they resume, followed in the log to its end or its next
        suspension. An id that names no call of the agent's run waiting for its result (in
        `session_id`, when named; of one run) is refused naming where it is."""
        spec = await self._registry.resolve_agent(
            agent.project_slug, agent.agent_name, metadata=caller.metadata
        )
        project_id, asker = spec.agent.project_id, spec.agent.slug or spec.agent.name
        answers: list[tuple[run_pb2.InputRequest, str]] = []
        for call_id, output, field in results:
            try:
                request = await self._registry.get_input_request(
                    project_id, call_id, metadata=caller.metadata
                )
            except (NotFound, InvalidArgument):  # no such request, or an id that cannot be one
                request = run_pb2.InputRequest()
            if (
                request.kind != run_pb2.INPUT_KIND_CLIENT_TOOL
                or request.state != run_pb2.INPUT_REQUEST_STATE_PENDING
                or (request.agent, *request.delegation_path) != (asker,)
                or request.session_id != (session_id or request.session_id)
                or request.run_id != (answers[0][0].run_id if answers else request.run_id)
            ):
                raise InvalidParameterValue(field, f"{call_id!r} is no tool call waiting for its result")
            answers.append((request, output))
        events: AsyncIterator[run_pb2.RunEvent] | None = None
        for request, output in answers:
            if events is not None:
                await events.aclose()  # type: ignore[attr-defined]
            answer = run_pb2.InputResponse(answer=output)
            events = await self.respond_to_input(caller, project_id, request.id, answer)
        assert events is not None, "a follow-up carries at least one result"
        return await chat_of_log(answers[0][0].session_id, answers[0][0].run_id, events)

    async def _events(
        self, caller: Caller, request: executor_service_pb2.RunRequest
    ) -> AsyncIterator[run_pb2.RunEvent]:
        self.check_message(request.input)
        if request.HasField("model_settings"):
            check_model_settings(request.model_settings)
        run = self._router.run(request, timeout=self._timeout_seconds, metadata=caller.metadata)
        try:
            async with contextlib.aclosing(run):  # leaving early cancels the run below at once
                async for event in run:
                    yield event
        except RunNotPlaced as refused:
            if refused.busy:
                raise ExecutorsBusy() from None
            raise NoExecutor(refused.message) from None

    # Agents.

    async def terminate_agent(self, caller: Caller, project_id: str, agent: str) -> str:
        """Terminates an agent (named by id, slug or exact name) and stops its runs in flight;
        the registry's message about it. Terminated first, so no new run can start; then the runs
        in flight stop (the runs below them too) on every executor, which know it by id."""
        agent_id = (await self._registry.get_agent(project_id, agent, metadata=caller.metadata)).id
        message = await self._registry.delete_agent(project_id, agent_id, metadata=caller.metadata)
        await self._router.cancel_runs(
            project_id, agent_id, reason="agent terminated", metadata=caller.metadata
        )
        return message

    async def cancel_run(
        self, caller: Caller, project_id: str, agent_id: str, run_id: str, reason: str
    ) -> int:
        """Cancels one of the agent's runs in flight, on whichever executor holds it (the runs
        below it stop with it); how many were cancelled (0: no executor holds it)."""
        return await self._router.cancel_runs(
            project_id, agent_id, reason=reason, run_id=run_id, metadata=caller.metadata
        )

    # Projects.

    async def delete_project(self, caller: Caller, project_id: str) -> reg.DeleteProjectResponse:
        """Deletes the project in the registry (as the caller: its owner or a superuser), then
        has the memory service erase its sessions and events, end the watch streams on them and
        refuse appends to it — so its former owner reads and writes nothing of it from then on,
        through any gateway replica. The erasure is the mesh's own act, with the system token."""
        request = reg.DeleteProjectRequest(id=project_id)
        deleted = await unary(self._registry.stub.DeleteProject, request, metadata=caller.metadata)
        await self._memory.delete_project_sessions(project_id, metadata=self._router.system_metadata())
        return deleted

    async def erase_run(self, project_id: str, session_id: str, run_id: str) -> int:
        """Erases a session's log that is the run's turn alone: a deleted response's, which the
        caller may delete (checked before). The mesh's own act, with the system token."""
        metadata = self._router.system_metadata()
        return await self._memory.erase_run(session_id, project_id, run_id, metadata=metadata)

    # Sessions.

    async def check_session(self, caller: Caller, project_id: str, session_id: str) -> None:
        """Raises SessionNotFound unless the session exists in the project (sessions are their
        project's: another project's session of the same id is a different one)."""
        try:
            await self._memory.get_session(session_id, project_id=project_id, metadata=caller.metadata)
        except NotFound:
            raise SessionNotFound(session_id) from None

    async def reset_session(self, caller: Caller, project_id: str, session_id: str) -> int:
        """Resets the project's session: its agents' context starts afresh (their history reads
        only what comes next; the events stay), and every executor drops what it keeps for the
        session's agents (built runtimes, frozen system prompts, MCP connections), so its next
        message builds them afresh. How many cached agents were released."""
        await self.check_session(caller, project_id, session_id)
        await self._memory.reset_session_context(session_id, project_id=project_id, metadata=caller.metadata)
        return await self._router.end_session(session_id, metadata=caller.metadata)

    async def list_sessions(
        self, caller: Caller, project_id: str, *, page_size: int, page_token: str = "", page: int = 1
    ) -> mem.ListSessionsResponse:
        """The project's sessions, most recently active first: the page after `page_token`, or
        without one the `page`-th page (1-based)."""
        # Memory reaches page N by its keyset boundary in one call (a page token and a page
        # number are exclusive).
        return await self._memory.list_sessions(
            project_id,
            page_size=page_size,
            page_token=page_token,
            page=0 if page_token else page,
            metadata=caller.metadata,
        )

    async def session_events(
        self,
        caller: Caller,
        project_id: str,
        session_id: str,
        *,
        page_size: int,
        page_token: str = "",
        after_seq: int = 0,
    ) -> mem.ListEventsResponse:
        """A page of every event of the project's session, all agents', in `seq` order."""
        await self.check_session(caller, project_id, session_id)
        request = mem.ListEventsRequest(
            session_id=session_id,
            project_id=project_id,
            page_size=page_size,
            page_token=page_token,
            after_seq=after_seq,
        )
        return await unary(self._memory.stub.ListEvents, request, metadata=caller.metadata)
