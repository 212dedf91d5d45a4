"""A child run outlives its caller's broken stream (docs/durability.md, "A child run
outlives its caller").

A delegated run or a workflow's sub-agent run names its caller's run in its request
(`caller_run_id`): the caller follows it in the session's log should the stream break. Such a run
is therefore not cancelled when its stream breaks — the caller's executor may have died or handed
the caller over, and the resumed caller (or workflow) will read this run's end from the log.
Instead it goes on, its events going to the log only, and is cancelled when the caller's run
shows in the log that it went on without it: it recorded its own end (it was cancelled, its
deadline passed, a newer message interrupted it) or, for a delegation, the delegation's response
(the caller gave up waiting). A stream cannot tell a caller's death from its cancel; the log can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from agentmesh.executor.context.events import EventSink
from agentmesh.executor.durability.child_log import ChildLog
from agentmesh.executor.run.end import deadline_passed
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError

logger = logging.getLogger(__name__)

CALLER_WENT_ON = "its caller's run went on without it (recorded its end or this delegation's response)"
# A cancelled caller records its end at once, so the first look usually finds it; a caller that
# died is resumed a lease time later, and is looked at less and less often meanwhile.
_FIRST_POLL_SECONDS = 0.3
_MAX_POLL_SECONDS = 2.0


class Outliving:
    """The runs of this executor that may outlive their caller's stream: which project each is
    in (to read its caller's log), and the watches of those that do."""

    def __init__(self, memory: MemoryClient, *, system_metadata: Callable[[], Metadata | None]) -> None:
        self._memory = memory
        self._system_metadata = system_metadata
        self._projects: dict[asyncio.Task[Any], str] = {}
        self._watches: set[asyncio.Task[None]] = set()

    def log(self, session_id: str, project_id: str) -> ChildLog:
        """A session's log, read as the mesh itself."""
        return ChildLog(
            self._memory, session_id=session_id, project_id=project_id, metadata=self._system_metadata()
        )

    def admitted(self, run: asyncio.Task[Any], project_id: str) -> None:
        self._projects[run] = project_id

    def ended(self, run: asyncio.Task[Any]) -> None:
        self._projects.pop(run, None)

    def keep(
        self,
        request: executor_service_pb2.RunRequest,
        run: asyncio.Task[Any],
        sink: EventSink,
        *,
        cancel: Callable[[str], None],
    ) -> bool:
        """Whether `run`, whose stream broke, goes on (watched until its caller went on without
        it): its request names its caller's run and its deadline has not passed. A run still in
        admission goes on too (its caller's death must not cancel it there either); its
        caller's log is watched once it is admitted (its project known)."""
        if not request.caller_run_id or run.done() or deadline_passed():
            # A deadline that passed ends the run as it ends its caller's.
            return False

        def log() -> ChildLog | None:
            project_id = self._projects.get(run)
            return None if project_id is None else self.log(request.session_id, project_id)

        watch = asyncio.create_task(
            outlive_caller(
                run,
                sink,
                log,
                caller_run_id=request.caller_run_id,
                delegation_id=request.delegation_id,
                cancel=cancel,
            ),
            name=f"outlive caller {request.caller_run_id}",
        )
        self._watches.add(watch)
        watch.add_done_callback(self._watches.discard)
        return True


async def outlive_caller(
    run: asyncio.Task[Any],
    sink: EventSink,
    log: Callable[[], ChildLog | None],
    *,
    caller_run_id: str,
    delegation_id: str,
    cancel: Callable[[str], None],
) -> None:
    """Keeps `run` going after its stream broke: drains its events to nowhere (the sink is
    bounded) and cancels it with `cancel` once its caller's run went on without it."""
    drained = asyncio.ensure_future(_discard(sink, run))
    poll = _FIRST_POLL_SECONDS
    try:
        while not run.done():
            await asyncio.wait({run}, timeout=poll)
            poll = min(poll * 2, _MAX_POLL_SECONDS)
            if run.done():
                break
            caller = log()
            if caller is None:  # still in admission
                continue
            try:
                abandoned = await caller.abandoned(caller_run_id, delegation_id)
            except DomainError as error:  # memory away: look again
                logger.warning("cannot read the log of run %s's caller: %s", caller_run_id, error)
                continue
            if abandoned:
                cancel(CALLER_WENT_ON)
                break
        await drained
    finally:
        drained.cancel()


async def _discard(sink: EventSink, run: asyncio.Task[Any]) -> None:
    with contextlib.suppress(BaseException):
        async for _ in sink.drain_batches(run):
            pass
