"""The A2A task operations, transport-free (the bindings are thin adapters: handler.py).

A task is a run started by a user message; its truth is the memory service's event log, never
this process: `get`, `list`, `cancel` and `subscribe` read the log, so they work from any gateway
replica and after the run moved executors. Sending goes through the gateway's one chat path
(`AgentGateway.start_chat`); the run's stream is then drained by `LiveRuns`, detached from the
client's request, because an A2A task outlives its client's connection: a client that hangs up
resubscribes (here or on another replica) instead of cancelling the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf.timestamp_pb2 import Timestamp

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import RunRouter
from agentmesh.gateway.a2a.convert import (
    RUN_STATES,
    TASK_EVENT_TYPES,
    TaskEventStream,
    TaskId,
    TaskSnapshot,
    Update,
    message_reply,
    task_from_events,
    told_enough,
    user_message,
)
from agentmesh.gateway.chat_stream import ChatStream
from agentmesh.gateway.errors import InvalidRequest, TaskNotFound
from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.gateway.resume import INPUTS, callers_of, follow_run, is_final, tree_of
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.memory.v1 import resources_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as reg_resources
from agentmesh.runtime.errors import DomainError, FailedPrecondition, NotFound

logger = logging.getLogger(__name__)

EventType = resources_pb2.EventType
MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 50


class LiveRuns:
    """Runs this gateway started over A2A, each drained to its end by a task of its own, so the
    run goes on when the client that started it hangs up. At shutdown the drains are cancelled,
    which cancels their runs (their tasks end `canceled` in the log)."""

    def __init__(self) -> None:
        self._drains: set[asyncio.Task[None]] = set()

    def follow(self, chat: ChatStream) -> AsyncIterator[run_pb2.RunEvent | DomainError]:
        """The run's events as they come; a DomainError item is how the run's stream broke."""
        queue: asyncio.Queue[run_pb2.RunEvent | DomainError | None] = asyncio.Queue()

        async def drain() -> None:
            try:
                async with contextlib.aclosing(chat):
                    async for event in chat.events():
                        queue.put_nowait(event)
            except DomainError as error:
                queue.put_nowait(error)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(drain(), name=f"a2a run {chat.run_id}")
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)
        return _read(queue)

    async def stop(self) -> None:
        for task in list(self._drains):
            task.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)


def _not_waiting(snapshot: TaskSnapshot, why: str) -> a2a_errors.UnsupportedOperationError:
    return a2a_errors.UnsupportedOperationError(
        f"message.task_id: task {snapshot.task.id!r} is no longer input-required ({why})"
    )


async def _items(events: AsyncIterator[run_pb2.RunEvent]) -> AsyncIterator[run_pb2.RunEvent | DomainError]:
    """A run's events followed in the log, with how the following broke as the last item."""
    try:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                yield event
    except DomainError as error:
        yield error


async def _read(
    queue: asyncio.Queue[run_pb2.RunEvent | DomainError | None],
) -> AsyncIterator[run_pb2.RunEvent | DomainError]:
    while (item := await queue.get()) is not None:
        yield item


@dataclass(frozen=True)
class Agent:
    """The agent an A2A call addresses, resolved as the caller may see it."""

    ref: AgentRef
    spec: reg_resources.AgentSpec

    @property
    def project_id(self) -> str:
        return self.spec.agent.project_id

    @property
    def slug(self) -> str:
        return self.spec.agent.slug


class A2ATasks:
    """SendMessage, GetTask, ListTasks, CancelTask and SubscribeToTask for every agent."""

    def __init__(
        self,
        *,
        gateway: AgentGateway,
        registry: RegistryClient,
        memory: MemoryClient,
        router: RunRouter,
        live: LiveRuns,
        cancel_wait_seconds: float = 30.0,
    ) -> None:
        self._gateway = gateway
        self._registry = registry
        self._memory = memory
        self._router = router
        self._live = live
        self._cancel_wait_seconds = cancel_wait_seconds

    async def agent(self, caller: Caller, ref: AgentRef) -> Agent:
        spec = await self._registry.resolve_agent(ref.project_slug, ref.agent_name, metadata=caller.metadata)
        return Agent(ref, spec)

    # Sending.

    async def send(
        self, caller: Caller, agent: Agent, message: a2a_pb2.Message, text: str
    ) -> tuple[TaskEventStream, a2a_pb2.Task, AsyncIterator[run_pb2.RunEvent | DomainError]]:
        """Starts the task a message asks for and returns its stream converter, the task as it
        starts (working, the user's message in its history) and the run's events. The message's
        context is the session (a new one when it names none); a message naming a task continues
        that task's context — or, when that task waits for input, answers it (`_answer`)."""
        if message.task_id:
            snapshot = await self._addressed_task(caller, agent, message)
            if snapshot.task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED:
                return await self._answer(caller, agent, snapshot, message, text)
            session_id = snapshot.task.context_id
        else:
            session_id = self._gateway.session_id(message.context_id or None, field="message.context_id")
        chat = await self._gateway.start_chat(caller, agent.ref, text, session_id)
        task_id = TaskId(chat.run_id, session_id)
        stream = TaskEventStream(task_id, chat.run_id)
        started = a2a_pb2.Task()
        started.CopyFrom(stream.task)
        started.status.timestamp.GetCurrentTime()
        started.history.append(
            user_message(text, task=task_id, message_id=message.message_id or uuid.uuid4().hex)
        )
        return stream, started, self._live.follow(chat)

    async def _addressed_task(self, caller: Caller, agent: Agent, message: a2a_pb2.Message) -> TaskSnapshot:
        snapshot = await self.get(caller, agent, message.task_id)
        if message.context_id and message.context_id != snapshot.task.context_id:
            raise InvalidRequest.field("message.context_id", "is not the context of message.task_id")
        if snapshot.is_terminal:
            # The spec: a task that ended takes no more messages; a message without `task_id` in
            # the same context starts the next task.
            state = a2a_pb2.TaskState.Name(snapshot.task.status.state)
            raise a2a_errors.UnsupportedOperationError(
                f"message.task_id: task {message.task_id!r} has ended ({state}); send the message"
                " without task_id, in its context_id, to start a new task"
            )
        return snapshot

    async def _answer(
        self, caller: Caller, agent: Agent, snapshot: TaskSnapshot, message: a2a_pb2.Message, text: str
    ) -> tuple[TaskEventStream, a2a_pb2.Task, AsyncIterator[run_pb2.RunEvent | DomainError]]:
        """A message on a task that waits for input: the response to its run's oldest pending
        request (convert.message_reply), and the run as it resumes, followed in the log (the run
        goes on on an executor whether or not anyone follows it)."""
        task_id = TaskId.parse(snapshot.task.id)
        assert task_id is not None
        # Its run's requests, or those of the runs it delegated to (theirs, with it first in
        # their path): the session's turn is its run's while it waits.
        pending = await self._waiting_for(caller, agent, task_id)
        if not pending:
            raise _not_waiting(snapshot, "its request was answered meanwhile")
        response = message_reply(pending[0], message)
        try:
            events = await self._gateway.respond_to_input(caller, agent.project_id, pending[0].id, response)
        except FailedPrecondition as error:  # answered (or expired) since it was listed
            raise _not_waiting(snapshot, error.message) from None
        started = a2a_pb2.Task()
        started.CopyFrom(snapshot.task)
        started.status.Clear()
        started.status.state = a2a_pb2.TaskState.TASK_STATE_WORKING
        started.status.timestamp.GetCurrentTime()
        started.history.append(
            user_message(text, task=task_id, message_id=message.message_id or uuid.uuid4().hex)
        )
        return TaskEventStream(task_id, task_id.run_id), started, _items(events)

    async def _waiting_for(self, caller: Caller, agent: Agent, task_id: TaskId) -> list[run_pb2.InputRequest]:
        """The pending requests the task's run waits for, oldest first: its own, or those of the
        runs it delegated to (theirs, with it first in their path) — the session's turn is its
        run's while it waits."""
        return [
            request
            for request in await self._gateway.pending_requests(
                caller, agent.project_id, task_id.session_id, agent=agent.slug
            )
            if request.run_id == task_id.run_id or request.delegation_path
        ]

    # Reading.

    async def get(
        self, caller: Caller, agent: Agent, task_id: str, *, history_length: int | None = None
    ) -> TaskSnapshot:
        """The task as the log tells it; TaskNotFound unless it is a run this agent started for
        a user message, in a session of its project."""
        parsed = TaskId.parse(task_id)
        if parsed is None:
            raise TaskNotFound(task_id)
        run = {"session_id": parsed.session_id, "project_id": agent.project_id, "run_id": parsed.run_id}
        try:
            ends = [mem.ListEventsRequest(**run, page_size=1, descending=newest) for newest in (False, True)]
            first, latest = await asyncio.gather(
                *(self._memory.list_events(end, metadata=caller.metadata) for end in ends)
            )
        except NotFound:
            raise TaskNotFound(task_id) from None
        if (
            not first.events
            or first.events[0].event_type != EventType.EVENT_TYPE_USER_MESSAGE
            or first.events[0].agent != agent.slug
        ):
            raise TaskNotFound(task_id)
        # Only the events the task is made of, newest first, and only as far back as the
        # history asked for: a run's log may be long, its task is not.
        told: list[resources_pb2.Event] = []
        request = mem.ListEventsRequest(
            **run,
            event_types=TASK_EVENT_TYPES,
            descending=True,
            page_size=1000 if history_length is None else min(1000, history_length + 2),
        )
        async with contextlib.aclosing(self._memory.iter_events(request, metadata=caller.metadata)) as listed:
            async for event in listed:
                told.append(event)
                if told_enough(told, history_length):
                    break
        events = told[::-1]
        if not any(is_final(event) for event in events):
            events = await self._with_requests_below(caller, agent, parsed, events)
        snapshot = task_from_events(parsed, events, history_length=history_length)
        # The run's latest event, of any type: when its task last changed, and where a
        # subscriber follows on from.
        snapshot.last_seq = latest.events[0].seq
        snapshot.task.status.timestamp.CopyFrom(latest.events[0].created_at)
        return snapshot

    async def _with_requests_below(
        self, caller: Caller, agent: Agent, task_id: TaskId, events: list[resources_pb2.Event]
    ) -> list[resources_pb2.Event]:
        """A running task's events with the requests for input of the runs it delegated to, and
        their responses: the task waits for those too (it is `input-required` while one is
        pending)."""
        request = mem.ListEventsRequest(
            session_id=task_id.session_id,
            project_id=agent.project_id,
            event_types=[*INPUTS, EventType.EVENT_TYPE_INPUT_REQUESTED, EventType.EVENT_TYPE_INPUT_RECEIVED],
            page_size=1000,
        )
        session = [event async for event in self._memory.iter_events(request, metadata=caller.metadata)]
        below = tree_of(task_id.run_id, callers_of(session)) - {task_id.run_id}
        asking = [event for event in session if event.run_id in below and event.event_type not in INPUTS]
        return sorted([*events, *asking], key=lambda event: event.seq)

    async def list(
        self,
        caller: Caller,
        agent: Agent,
        *,
        context_id: str = "",
        status: a2a_pb2.TaskState.ValueType = a2a_pb2.TaskState.TASK_STATE_UNSPECIFIED,
        status_since: Timestamp | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_token: str = "",
        history_length: int | None = None,
    ) -> a2a_pb2.ListTasksResponse:
        """A page of the agent's tasks (the runs its users' messages started), newest first;
        only those in `status` and last updated at or after `status_since` when given. The
        memory service filters before it pages, so pages and `total_size` count only those."""
        request = mem.ListEventsRequest(
            session_id=context_id,
            project_id=agent.project_id,
            agent=agent.slug,
            event_types=[EventType.EVENT_TYPE_USER_MESSAGE],
            page_size=page_size,
            page_token=page_token,
            descending=True,
            include_total_size=True,
        )
        if status:
            if status not in RUN_STATES:
                return _no_tasks(page_size)  # a state no task of ours is ever in
            request.run_states.append(RUN_STATES[status])
        if status_since is not None:
            request.run_active_since.CopyFrom(status_since)
        if context_id and not self._gateway.is_session_id(context_id):
            return _no_tasks(page_size)  # no task was ever sent in it
        try:
            page = await self._memory.list_events(request, metadata=caller.metadata)
        except NotFound:
            if not context_id:
                raise
            return _no_tasks(page_size)  # a context nobody used yet has no session
        tasks = [
            (
                await self.get(
                    caller, agent, str(TaskId(e.run_id, e.session_id)), history_length=history_length
                )
            ).task
            for e in page.events
        ]
        return a2a_pb2.ListTasksResponse(
            tasks=tasks, next_page_token=page.next_page_token, page_size=page_size, total_size=page.total_size
        )

    # Following and cancelling.

    async def subscribe(self, caller: Caller, agent: Agent, snapshot: TaskSnapshot) -> AsyncIterator[Update]:
        """The task's events after `snapshot`, from the log, until the task ends."""
        parsed = TaskId.parse(snapshot.task.id)
        assert parsed is not None
        stream = TaskEventStream(parsed, parsed.run_id)
        rest = follow_run(
            self._memory,
            parsed.session_id,
            project_id=agent.project_id,
            after_seq=snapshot.last_seq,
            run_id=parsed.run_id,
            metadata=caller.metadata,
        )
        async with contextlib.aclosing(rest):
            async for event in rest:
                for update in stream.feed(event):
                    yield update
                if stream.done:
                    return

    async def cancel(self, caller: Caller, agent: Agent, snapshot: TaskSnapshot) -> TaskSnapshot:
        """Cancels the task's run on whichever executor holds it (the runs below it stop with
        it) and returns the task once its end is recorded (or as it stands after a bounded
        wait, when the run's executor cannot be reached)."""
        parsed = TaskId.parse(snapshot.task.id)
        assert parsed is not None
        waiting = snapshot.task.status.state == a2a_pb2.TaskState.TASK_STATE_INPUT_REQUIRED
        # A waiting run is parked at the registry, held by no executor: the registry cancels it
        # (through a request it waits for), and the executor it hands it to records the end.
        pending = await self._waiting_for(caller, agent, parsed) if waiting else []
        if pending:
            try:
                await self._gateway.cancel_waiting_run(
                    caller, agent.project_id, pending[0].id, reason=_CANCELLED_OVER_A2A
                )
            except FailedPrecondition:  # answered meanwhile: the run goes on, on an executor
                pending = []
        if not pending:
            await self._router.cancel_runs(
                agent.project_id,
                agent.spec.agent.id,
                reason=_CANCELLED_OVER_A2A,
                run_id=parsed.run_id,
                metadata=caller.metadata,
            )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._cancel_wait_seconds):
                async for _ in self.subscribe(caller, agent, snapshot):
                    pass
        return await self.get(caller, agent, snapshot.task.id)


_CANCELLED_OVER_A2A = "the task was cancelled over A2A"


def _no_tasks(page_size: int) -> a2a_pb2.ListTasksResponse:
    return a2a_pb2.ListTasksResponse(page_size=page_size, total_size=0)
