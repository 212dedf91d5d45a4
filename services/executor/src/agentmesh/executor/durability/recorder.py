"""Records a run's steps as events in the memory service, tagged with the current trace."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agentmesh.executor.durability.detached import run_detached
from agentmesh.executor.durability.outbox import EventOutbox, is_superseded, is_taken
from agentmesh.executor.durability.transient import is_transient
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2, resources_pb2
from agentmesh.runtime.batching import Coalescer
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.protos import struct
from agentmesh.runtime.telemetry import current_trace_ids

EventType = resources_pb2.EventType
T = TypeVar("T")

# How long an append left in doubt by a memory outage is sent again (`_resolving_doubt`): longer
# than a database restart takes.
IN_DOUBT_SECONDS = 5.0
_RETRY_SECONDS = 0.2
_MAX_RETRY_SECONDS = 1.0


# The metadata naming the incarnation of a resumed run an event belongs to (memory `fence.py`).
RESUME = "resume"


def end_key(run_id: str) -> str:
    """The idempotency key of a run's one final event (`agent_response`, or the `error` it failed
    or was cancelled with). Whoever records it — the run, its cancellation, the executor that took
    the run over — uses this key, so the session holds exactly one: a second, different end is
    refused by the memory service (IDEMPOTENCY_KEY_REUSED) and the first stands."""
    return f"{run_id}:end"


def response_key(delegation_id: str) -> str:
    """The idempotency key of a delegation's one `delegation_response` (as `end_key`)."""
    return f"{delegation_id}:response"


def request_key(delegation_id: str) -> str:
    """The idempotency key of a delegation's `delegation_request`: its own, not its position in
    the run, so that a run that does not know whether its request was stored (the append ran out
    of time) can ask again and learn it (delegation.py `_settled`)."""
    return f"{delegation_id}:request"


# The reason of the `error` note a run's taker records first when it resumes the run.
RUN_RESUMED = "RUN_RESUMED"


def resumed_key(run_id: str, resume: int) -> str:
    """The idempotency key of the note a run's `resume`th taker records first: the key that fences
    every event of the incarnation before (memory `fence.py`)."""
    return f"{run_id}:resumed:{resume}"


def resumes(events: Iterable[resources_pb2.Event], *, restarts_only: bool = False) -> int:
    """How many times the run of these events was resumed: its takers' notes. Its current
    incarnation is that number (0: the run as first started). `restarts_only`: only the resumes
    after its executor stopped, not those after it waited for a person (note `after_input`)."""
    return sum(
        1
        for event in events
        if event.event_type == EventType.EVENT_TYPE_ERROR
        and "reason" in event.metadata.fields
        and event.metadata.fields["reason"].string_value == RUN_RESUMED
        and not (
            restarts_only
            and "after_input" in event.metadata.fields
            and event.metadata.fields["after_input"].bool_value
        )
    )


class RunSuperseded(Exception):
    """The memory service refused an event of this run because the run is no longer this
    executor's: another executor took it over (`RUN_TAKEN_OVER`: its note of the run's next
    incarnation is stored) or ended it (`RUN_ENDED`). The run stops here without an end, as a
    run whose lease was lost does (runner `_live`); from then on its recorder records nothing."""

    def __init__(self, refusal: DomainError) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


@dataclass(frozen=True)
class NewEvent:
    """An event to record: what, its content, and how it links to others."""

    event_type: EventType.ValueType
    content: str | dict[str, Any] | list[Any]
    metadata: dict[str, Any] | None = None
    parent_event_id: str = ""
    delegation_id: str | None = None
    idempotency_key: str | None = None  # else one made of the run id and the event's position


class Recorder:
    """Appends one agent's events for one run to its session.

    Events name their agent by slug (`agent`); each also carries the agent's display name as
    `agent_name` in its metadata, so a reader sees both. Every event carries an idempotency key
    made of the run id and its position in the run, so an append retried after a lost answer
    stores it once. A resumed run's recorder says which incarnation of the run it records
    (`resume`: the taker's resume number, in every event's metadata), so that the memory service
    refuses what an earlier incarnation still sends (memory `fence.py`); once refused so, the
    recorder raises `RunSuperseded` for every event, its end included.
    """

    def __init__(
        self,
        memory: MemoryClient,
        *,
        session_id: str,
        project_id: str,
        agent: str,
        run_id: str,
        delegation_id: str = "",
        agent_name: str = "",
        secrets: Secrets | None = None,
        agent_id: str = "",
        outbox: EventOutbox | None = None,
        key_prefix: str = "",
        resume: int = 0,
    ) -> None:
        self._memory = memory
        self.resume = resume
        self.superseded: DomainError | None = None  # the refusal that said so
        # A run resumed on another executor records under a prefix of its own: its positions
        # start again at 1, and must not meet the keys its first executor used.
        self._key_prefix = key_prefix or run_id
        # Every event is recorded scrubbed of the executor's secrets: none may reach the log.
        self._secrets = secrets or Secrets()
        self._outbox = outbox
        self.agent_id = agent_id
        self.session_id = session_id
        self.project_id = project_id
        self.agent = agent
        self.agent_name = agent_name or agent
        self.run_id = run_id
        self.delegation_id = delegation_id
        self._positions = itertools.count(1)
        # Concurrent appends of this run (a step's parallel tool results) share calls.
        self._coalesced: Coalescer[memory_service_pb2.NewEvent, resources_pb2.Event] = Coalescer(self._append)

    async def record(
        self,
        event_type: EventType.ValueType,
        content: str | dict[str, Any] | list[Any],
        *,
        metadata: dict[str, Any] | None = None,
        parent_event_id: str = "",
        delegation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> resources_pb2.Event:
        (event,) = await self.record_many(
            [NewEvent(event_type, content, metadata, parent_event_id, delegation_id, idempotency_key)]
        )
        return event

    async def record_end(
        self,
        event_type: EventType.ValueType,
        content: str | dict[str, Any] | list[Any],
        *,
        idempotency_key: str,
        timeout_seconds: float,
        metadata: dict[str, Any] | None = None,
        parent_event_id: str = "",
        delegation_id: str | None = None,
    ) -> resources_pb2.Event | None:
        """Records an event that must be recorded whatever happens (a run's end, a delegation's
        response): detached from the run's cancellation and deadline, and, when the memory service
        does not take it, kept in the outbox to be appended again (None then). None too when
        another event already holds the key (the first stands). The event is a receipt, as
        `record_many`'s."""
        self._raise_if_superseded()
        (new,) = self._protos(
            [NewEvent(event_type, content, metadata, parent_event_id, delegation_id, idempotency_key)]
        )
        try:
            response = await run_detached(
                lambda: self._memory.append_events(
                    self.session_id, self.project_id, [new], receipts_only=True
                ),
                timeout_seconds=timeout_seconds,
            )
        except Exception as error:
            if is_taken(error):
                return None
            self._raise_if_superseded(error)
            if self._outbox is None or not is_transient(error):
                raise
            self._outbox.keep(self.session_id, self.project_id, new, run=(self.agent_id, self.run_id))
            return None
        return response.events[0]

    async def record_many(self, events: Sequence[NewEvent]) -> list[resources_pb2.Event]:
        """Appends events in one batch (atomically, in this order). The events returned are
        receipts: their id, session, seq and time (the memory service does not echo the content
        back: the run knows what it recorded)."""
        if not events:
            return []
        return await self._append(self._protos(events))

    async def record_then_list(
        self, event: NewEvent, listing: memory_service_pb2.ListEventsRequest
    ) -> tuple[resources_pb2.Event, memory_service_pb2.ListEventsResponse]:
        """Records `event` and reads `listing` of the session after it, in one call (a delegated
        run's input and its history: one round trip less per delegation level)."""
        events = self._protos([event])
        response = await self._fenced(
            lambda: self._memory.append_events(
                self.session_id, self.project_id, events, receipts_only=True, list_after_append=listing
            )
        )
        return response.events[0], response.listed

    async def record_coalesced(self, events: Sequence[NewEvent]) -> list[resources_pb2.Event]:
        """As `record_many`, but sharing the append with other events of this run recorded at the
        same time (a step's parallel tool results): sent at once when no such append is
        in flight, else together with everything queued meanwhile as soon as it returns. The
        events keep their keys from now on, so an append sent again (its sender was cancelled)
        stores nothing twice; a refusal of the shared append is every sharer's."""
        if not events:
            return []
        return await self._coalesced.submit(self._protos(events))

    async def _append(self, events: list[memory_service_pb2.NewEvent]) -> list[resources_pb2.Event]:
        response = await self._fenced(
            lambda: self._memory.append_events(self.session_id, self.project_id, events, receipts_only=True)
        )
        return list(response.events)

    async def _fenced(self, append: Callable[[], Awaitable[T]]) -> T:
        """A step's append (`_resolving_doubt`), unless the run is no longer this executor's."""
        self._raise_if_superseded()
        try:
            return await _resolving_doubt(append)
        except DomainError as error:
            self._raise_if_superseded(error)
            raise

    def _raise_if_superseded(self, error: BaseException | None = None) -> None:
        """Raises RunSuperseded when `error` says the run is no longer this executor's, or an
        earlier refusal did. (A child run's input refused because its *caller* was taken over is
        not: the child never started, and is refused like any run that could not record its input.)"""
        if (
            self.superseded is None
            and isinstance(error, DomainError)
            and is_superseded(error)
            and error.metadata.get("run_id") == self.run_id
        ):
            self.superseded = error
        if self.superseded is not None:
            raise RunSuperseded(self.superseded) from error

    def _protos(self, events: Sequence[NewEvent]) -> list[memory_service_pb2.NewEvent]:
        trace_id, span_id = current_trace_ids()
        batch = []
        for event in events:
            content = self._secrets.scrub_value(event.content)
            new = memory_service_pb2.NewEvent(
                agent=self.agent,
                event_type=event.event_type,
                content=content if isinstance(content, str) else json.dumps(content),
                run_id=self.run_id,
                parent_event_id=event.parent_event_id,
                delegation_id=self.delegation_id if event.delegation_id is None else event.delegation_id,
                trace_id=trace_id,
                span_id=span_id,
                idempotency_key=event.idempotency_key or f"{self._key_prefix}:{next(self._positions)}",
            )
            metadata = {"agent_name": self.agent_name, **(event.metadata or {})}
            if self.resume:
                metadata[RESUME] = self.resume
            new.metadata.CopyFrom(struct(self._secrets.scrub_value(metadata)))
            batch.append(new)
        return batch


async def _resolving_doubt(append: Callable[[], Awaitable[T]]) -> T:
    """An append, sent again while the memory service fails it the way it does when it, or its
    database, is away. Such a failure leaves the append in doubt — the database may have
    committed it as it went away, the answer lost — and a run must not go on, nor fail, not
    knowing whether its step is in the log: a `delegation_request` stored unbeknown to its run
    would never get its response. The events keep their keys, so sending them again stores
    nothing twice (a stored one is answered as stored). For up to `IN_DOUBT_SECONDS`: then the
    error stands (the outage outlasted it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + IN_DOUBT_SECONDS
    delay = _RETRY_SECONDS
    while True:
        try:
            return await append()
        except Exception as error:
            if not is_transient(error) or loop.time() + delay > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, _MAX_RETRY_SECONDS)
