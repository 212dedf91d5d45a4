"""Resuming a run from the session's log on the executor that took it over
(docs/durability.md, "Resumption from the log").

A run's recorded events are its state. `read_run_log` turns them back into the steps the model
answered: every step's calls from their intent events (`tool_call`, `delegation_request`, which
record the model's call id, step and place before anything runs), each with its recorded result
(`tool_result`, `delegation_response`) or none. `RunResumer.take_over` rebuilds the agent from its
spec (ResolveAgent, as the mesh itself) and hands the run to the runner, which goes on from where
the log stops (loops/llm.py): logged steps are not asked again, recorded results are reused, a
tool call with no result is in doubt (run again only when the tool is idempotent), an open
delegation is answered from its delegated run's end. A suspended run comes back the same way once
the person responded (or its request expired): the registry hands it over with its requests'
responses (OrphanedRun.input_requests), and resumes after input do not count towards the limit
on resumes after a stopped executor (loops/asking.py). A workflow agent's state is its sub-agent
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

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agentmesh.executor.agents.runtime import kind_name
from agentmesh.executor.durability import client_context
from agentmesh.executor.durability.child_log import ChildLog
from agentmesh.executor.durability.leases import OrphanCloser, count_in
from agentmesh.executor.durability.outbox import is_taken
from agentmesh.executor.durability.recorder import (
    RUN_RESUMED,
    EventType,
    Recorder,
    RunSuperseded,
    resumed_key,
)
from agentmesh.executor.durability.run_log import RunLog, read_run_log
from agentmesh.executor.errors import RESUME_LIMIT
from agentmesh.executor.providers.factory import settings_from_record
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1.resources_pb2 import Event
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2 as registry_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import calling_as

logger = logging.getLogger(__name__)

# A request the run's previous executor recorded after this one read the log (closer.answer_strays).
_STRAY = "the run was taken over from its executor as it delegated this, and went on without it"


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
        system_metadata: Callable[[], Metadata | None],
        max_resumes: int,
        executor_id: str,
        count_in: Callable[[registry_internal_service_pb2.OrphanedRun], Awaitable[bool]] | None = None,
    ) -> None:
        self._executor_id = executor_id
        self._memory = memory
        self._registry = registry
        self._closer = closer
        self._resume = resume
        # Counting a resumed run in again at the registry (a test fakes it).
        self._count_in = count_in or self._counted_in
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
        if orphan.cancelled_by:  # cancelled while it waited: its end, not a resume
            await self._closer.close(orphan, events=events)
            return
        after_input = bool(orphan.input_requests) or orphan.parked
        if log.restarts >= self._max_resumes and not after_input:
            await self._closer.close(
                orphan,
                events=events,
                reason=RESUME_LIMIT,
                message=f"the run was resumed {log.restarts} times and its executor stopped again; "
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

    async def _counted_in(self, orphan: registry_internal_service_pb2.OrphanedRun) -> bool:
        return await count_in(
            self._registry, orphan, executor_id=self._executor_id, metadata=self._system_metadata()
        )

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
        after_input = bool(orphan.input_requests) or orphan.parked
        why = "the input it waited for" if after_input else "its executor stopped"
        try:
            with calling_as(self._system_metadata()):
                await recorder.record(
                    EventType.EVENT_TYPE_ERROR,
                    f"the run resumed on executor {self._executor_id} after {why} (resume {number})",
                    metadata={
                        "reason": RUN_RESUMED,
                        "executor_id": self._executor_id,
                        **({"after_input": True} if after_input else {}),
                    },
                    parent_event_id=log.input.id,
                    idempotency_key=resumed_key(orphan.run_id, number),
                )
        except (RunSuperseded, DomainError) as error:
            if isinstance(error, DomainError) and not is_taken(error):
                raise
            logger.info("run %s is not resumed here: %s", orphan.run_id, error)
            return None
        noted = read_run_log(await self._closer.run_events(orphan))
        noted.responses = {request.id: request for request in orphan.input_requests}
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
        """The run's agent as it is now, at the version its session uses (None when it is gone or
        may not run)."""
        metadata = self._system_metadata()
        try:
            project = await self._registry.get_project(project_id=orphan.project_id, metadata=metadata)
            spec = await self._registry.resolve_agent(
                project.slug, orphan.agent_name, session_id=orphan.session_id, metadata=metadata
            )
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
    client_tools, client_tool_choice = client_context.recorded_tools(received.metadata)
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
        tree_start_seq=int(meta["tree_start_seq"].number_value) if "tree_start_seq" in meta else 0,
        model_settings=settings_from_record(meta["model_settings"].struct_value)
        if "model_settings" in meta
        else None,
        context=client_context.recorded(received.metadata),
        response_format=client_context.recorded_format(received.metadata),
        client_tools=client_tools,
        client_tool_choice=client_tool_choice,
    )
