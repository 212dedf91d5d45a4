"""Resuming a run from the session's log on the executor that took it over (issue 15 item 2;
docs/durability.md, "Resume from the log").

A run's recorded events are its state. `read_run_log` turns them back into the steps the model
answered: every step's calls from their intent events (`tool_call`, `delegation_request`, which
record the model's call id, step and place before anything runs), each with its recorded result
(`tool_result`, `delegation_response`) or none. `RunResumer.take_over` rebuilds the agent from its
spec (ResolveAgent, as the mesh itself) and hands the run to the runner, which goes on from where
the log stops (llm.LlmLoop): logged steps are not asked again, recorded results are reused, a
tool call with no result is in doubt (run again only when the tool is idempotent), an open
delegation is answered from its delegated run's end. A workflow agent's state is its sub-agent
runs in the log (`ChildLog.sub_agent_runs`, by their `sub_agent_id`): it goes through its steps
again, taking the ended ones' answers and waiting for those still going (workflow.py). A run
that cannot be resumed — an agent gone or not runnable, a log from before intent events carried
their step (or sub-agent runs their id), or one resumed `max_resumes` times already — is closed
as before (`OrphanCloser`) and stays counted out in the registry's books. A run that is resumed
is counted in again first (`count_in`: RenewRunLeases `resumed`), so its agent is `working`
while it goes on and its end is delivered by the finisher like any run's, its usage and
completed task counted once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.struct_pb2 import Value

from agentmesh.executor.agent import kind_name
from agentmesh.executor.child_log import ChildLog, is_final
from agentmesh.executor.errors import RESUME_LIMIT
from agentmesh.executor.llm import DELEGATION, TOOL, PlannedCall
from agentmesh.executor.models.base import Usage
from agentmesh.executor.models.factory import settings_from_record
from agentmesh.executor.outbox import is_taken
from agentmesh.executor.recorder import (
    RUN_RESUMED,
    EventType,
    Recorder,
    RunSuperseded,
    resumed_key,
    resumes,
)
from agentmesh.executor.tools.base import ToolOutput
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import resources_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as registry_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import calling_as

if TYPE_CHECKING:
    from agentmesh.executor.leases import OrphanCloser

logger = logging.getLogger(__name__)

# A request the run's previous executor recorded after this one read the log (closer.answer_strays).
_STRAY = "the run was taken over from its executor as it delegated this, and went on without it"
_INPUT_TYPES = (EventType.EVENT_TYPE_USER_MESSAGE, EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED)

Event = resources_pb2.Event


@dataclass
class LoggedCall:
    """A call of a logged step: the call, its intent event, and its recorded output (None: the
    log stops before it had one)."""

    call: PlannedCall
    event: Event
    output: ToolOutput | None = None


@dataclass
class LoggedStep:
    number: int
    calls: list[LoggedCall] = field(default_factory=list)


@dataclass
class RunLog:
    """What a run's events say about it (see the module's docstring)."""

    input: Event | None = None
    steps: list[LoggedStep] = field(default_factory=list)
    resumes: int = 0  # times it was resumed before
    ended: bool = False
    # A workflow's sub-agent runs in the log at takeover, by sub_agent_id (workflow.py).
    sub_agent_runs: dict[str, str] = field(default_factory=dict)
    problem: str = ""  # why it cannot be resumed ("" when it can)

    @property
    def answered(self) -> int:
        """Model steps answered before (a step that asked for nothing loggable is counted too)."""
        return max((step.number for step in self.steps), default=0)


def read_run_log(events: list[Event]) -> RunLog:
    """The run's state from its events (any order)."""
    log = RunLog()
    steps: dict[int, LoggedStep] = {}
    by_event: dict[str, LoggedCall] = {}
    by_delegation: dict[str, LoggedCall] = {}
    for event in sorted(events, key=lambda e: e.seq):
        meta = event.metadata.fields
        kind = event.event_type
        if kind in _INPUT_TYPES and log.input is None:
            log.input = event
        elif is_final(event):
            log.ended = True
        elif kind in (EventType.EVENT_TYPE_TOOL_CALL, EventType.EVENT_TYPE_DELEGATION_REQUEST):
            if "step" not in meta:
                log.problem = "its intent events were recorded without their step"
                continue
            logged = LoggedCall(_planned(event), event)
            steps.setdefault(logged.call.step, LoggedStep(logged.call.step)).calls.append(logged)
            by_event[event.id] = logged
            if kind == EventType.EVENT_TYPE_DELEGATION_REQUEST:
                by_delegation[event.delegation_id] = logged
        elif kind == EventType.EVENT_TYPE_TOOL_RESULT and event.parent_event_id in by_event:
            is_error = bool(meta["is_error"].bool_value) if "is_error" in meta else False
            by_event[event.parent_event_id].output = ToolOutput(event.content, is_error=is_error)
        elif kind == EventType.EVENT_TYPE_DELEGATION_RESPONSE and event.delegation_id in by_delegation:
            response = _json(event.content)
            by_delegation[event.delegation_id].output = ToolOutput(
                str(response.get("content", "")), is_error=response.get("outcome") != "completed"
            )
    for step in steps.values():
        step.calls.sort(key=lambda logged: logged.call.index)
    log.steps = [steps[number] for number in sorted(steps)]
    log.resumes = resumes(events)
    if log.input is None:
        log.problem = log.problem or "its input is not in the log"
    return log


def _planned(event: Event) -> PlannedCall:
    meta = event.metadata.fields
    content = _json(event.content)
    number = {name: int(meta[name].number_value) for name in ("step", "index") if name in meta}
    native = meta["native"].bool_value if "native" in meta else True
    usage = _usage(meta["usage"].struct_value.fields) if "usage" in meta else None
    call_id = meta["call_id"].string_value if "call_id" in meta else event.id
    if event.event_type == EventType.EVENT_TYPE_DELEGATION_REQUEST:
        target, task = str(content.get("agent", "")), str(content.get("task", ""))
        return PlannedCall(
            DELEGATION,
            call_id,
            target,
            {"agent": target, "task": task},
            task=task,
            native=native,
            usage=usage,
            **number,
        )
    arguments = content.get("arguments")
    return PlannedCall(
        TOOL,
        call_id,
        str(content.get("name", "")),
        arguments if isinstance(arguments, dict) else {},
        native=native,
        usage=usage,
        **number,
    )


def _usage(fields: Mapping[str, Value]) -> Usage:
    """A logged model step's usage, as its first intent event records it (llm.PlannedCall)."""

    def number(name: str) -> float:
        return fields[name].number_value if name in fields else 0

    return Usage(int(number("input_tokens")), int(number("output_tokens")), number("cost"))


def _json(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


Resume = Callable[
    [registry_internal_service_pb2.OrphanedRun, registry_pb2.AgentSpec, RunLog], Awaitable[None]
]


class RunResumer:
    """Takes an orphaned run over: resumes it from its log (`resume`, the runner's), or closes it
    when it cannot be resumed (see the module's docstring)."""

    def __init__(
        self,
        memory: MemoryClient,
        registry: RegistryClient,
        closer: OrphanCloser,
        *,
        resume: Resume,
        count_in: Callable[[registry_internal_service_pb2.OrphanedRun], Awaitable[bool]],
        system_metadata: Callable[[], Metadata | None],
        max_resumes: int,
        executor_id: str,
    ) -> None:
        self._executor_id = executor_id
        self._memory = memory
        self._registry = registry
        self._closer = closer
        self._resume = resume
        self._count_in = count_in
        self._system_metadata = system_metadata
        self._max_resumes = max_resumes

    async def close(self, orphan: registry_internal_service_pb2.OrphanedRun) -> None:
        """What `LeaseKeeper` calls for each orphan it is handed."""
        events = await self._closer.run_events(orphan)
        log = read_run_log(events)
        if not events:
            return
        if log.ended:  # closed or ended elsewhere: a request of it may still want its response
            await self._closer.answer_strays(orphan, message=_STRAY)
            return
        if log.resumes >= self._max_resumes:
            await self._closer.close(
                orphan,
                events=events,
                reason=RESUME_LIMIT,
                message=f"the run was resumed {log.resumes} times and its executor stopped again; "
                f"the limit is {self._max_resumes} (resume_max_times)",
            )
            return
        spec = await self._spec(orphan) if not log.problem else None
        if spec is not None and kind_name(spec.kind) != "llm":
            await self._read_sub_agent_runs(orphan, log)
        if spec is None or log.problem:
            if log.problem:
                logger.info("run %s cannot be resumed (%s): closing it", orphan.run_id, log.problem)
            await self._closer.close(orphan, events=events)
            return
        # Counted in again before it goes on (the agent is `working` while it runs, and its end
        # is a normal finish); closed runs above stay counted out.
        if not await self._count_in(orphan):
            logger.info("run %s was taken from this executor before it resumed: left alone", orphan.run_id)
            return
        noted = await self._noted(orphan, spec, log)
        if noted is not None:
            await self._resume(orphan, spec, noted)
        await self._closer.answer_strays(orphan, message=_STRAY)

    async def _noted(
        self, orphan: registry_internal_service_pb2.OrphanedRun, spec: registry_pb2.AgentSpec, log: RunLog
    ) -> RunLog | None:
        """Records that the run resumes here — its next incarnation's note, under the key that
        fences what the executor that lost it may still send (memory `fence.py`) — then reads its
        log again: complete now, as nothing of the earlier incarnation lands after the note.
        None when the run is not to be resumed here after all: it ended meanwhile, or another
        executor noted the same resume first (the note's key) or a later one."""
        assert log.input is not None
        number = log.resumes + 1
        recorder = taker_recorder(self._memory, orphan, spec, log.input, resume=number)
        try:
            with calling_as(self._system_metadata()):
                await recorder.record(
                    EventType.EVENT_TYPE_ERROR,
                    f"the run resumed on executor {self._executor_id} after its executor stopped "
                    f"(resume {number})",
                    metadata={"reason": RUN_RESUMED, "executor_id": self._executor_id},
                    parent_event_id=log.input.id,
                    idempotency_key=resumed_key(orphan.run_id, number),
                )
        except (RunSuperseded, DomainError) as error:
            if isinstance(error, DomainError) and not is_taken(error):
                raise
            logger.info("run %s is not resumed here: %s", orphan.run_id, error)
            return None
        noted = read_run_log(await self._closer.run_events(orphan))
        if kind_name(spec.kind) != "llm":
            await self._read_sub_agent_runs(orphan, noted)
        if noted.problem:  # what the lost executor recorded meanwhile cannot be resumed from
            logger.info("run %s cannot be resumed (%s): closing it", orphan.run_id, noted.problem)
            await self._closer.close(orphan)
            return None
        return noted

    async def _read_sub_agent_runs(
        self, orphan: registry_internal_service_pb2.OrphanedRun, log: RunLog
    ) -> None:
        """A workflow's sub-agent runs, into `log` (or why they cannot be told apart)."""
        assert log.input is not None
        children = ChildLog(
            self._memory,
            session_id=orphan.session_id,
            project_id=orphan.project_id,
            metadata=self._system_metadata(),
        )
        runs = await children.sub_agent_runs(log.input)
        if runs is None:
            log.problem = "its sub-agent runs were recorded without their sub_agent_id"
        else:
            log.sub_agent_runs = runs

    async def _spec(self, orphan: registry_internal_service_pb2.OrphanedRun) -> registry_pb2.AgentSpec | None:
        """The run's agent as it is now (None when it is gone or may not run)."""
        metadata = self._system_metadata()
        try:
            project = await self._registry.get_project(project_id=orphan.project_id, metadata=metadata)
            spec = await self._registry.resolve_agent(project.slug, orphan.agent_name, metadata=metadata)
        except DomainError as error:
            if error.code.name in ("NOT_FOUND", "PERMISSION_DENIED", "FAILED_PRECONDITION"):
                logger.info("run %s cannot be resumed: %s", orphan.run_id, error)
                return None
            raise
        if spec.agent.status in (registry_pb2.AGENT_STATUS_PAUSED, registry_pb2.AGENT_STATUS_TERMINATED):
            return None
        return spec


def taker_recorder(
    memory: MemoryClient,
    orphan: registry_internal_service_pb2.OrphanedRun,
    spec: registry_pb2.AgentSpec,
    received: Event,
    *,
    resume: int,
    **options: Any,
) -> Recorder:
    """A recorder of the taken-over run's incarnation `resume` (its taker's note, then the resumed
    run's events), with the Recorder's other `options`."""
    return Recorder(
        memory,
        session_id=orphan.session_id,
        project_id=spec.agent.project_id,
        agent=spec.agent.slug or spec.agent.name,
        agent_name=spec.agent.name,
        run_id=orphan.run_id,
        delegation_id=received.delegation_id,
        agent_id=spec.agent.id,
        resume=resume,
        **options,
    )


def resumed_request(
    orphan: registry_internal_service_pb2.OrphanedRun, spec: registry_pb2.AgentSpec, received: Event
) -> executor_service_pb2.RunRequest:
    """The request a resumed run goes on with, from its recorded input, per-message model
    settings included (the double-texting policy is not needed: the runner has the run wait
    for the turns still ahead of it, if any)."""
    meta = received.metadata.fields
    path = (
        [value.string_value for value in meta["delegation_path"].list_value.values]
        if "delegation_path" in meta
        else []
    )
    return executor_service_pb2.RunRequest(
        project_slug=spec.project_slug,
        agent_name=spec.agent.slug or spec.agent.name,
        session_id=orphan.session_id,
        input=received.content,
        delegation_id=received.delegation_id,
        delegation_depth=int(meta["depth"].number_value) if "depth" in meta else 0,
        delegation_path=path,
        parent_event_id=received.parent_event_id,
        as_sub_agent=bool(meta["as_sub_agent"].bool_value) if "as_sub_agent" in meta else False,
        model_settings=settings_from_record(meta["model_settings"].struct_value)
        if "model_settings" in meta
        else None,
    )
