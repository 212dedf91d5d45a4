"""Runs this run starts on the executor pool — a delegation's, a workflow's sub-agents' — and how
they ended. Each is a gRPC `Run` on an executor of the pool, never a call inside this process,
even when the target happens to be served here: one level deeper in the same session, naming its
caller's run (`child_request`). When its stream breaks after it started (that executor died or
handed it over), the caller follows it in the log (`child_log.py`, `follow`) instead of failing it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agentmesh.executor.client import RunNotPlaced, RunRouter
from agentmesh.executor.context.budget import remaining_budget
from agentmesh.executor.context.events import EventSink, usage_from_proto, usage_from_struct
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.delegation.a2a import RemoteA2AAgents
from agentmesh.executor.delegation.outcome import ChildOutcome, SuspendedBelow
from agentmesh.executor.durability.child_log import ChildLog, end_outcome
from agentmesh.executor.providers.base import Usage
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.memory.v1 import resources_pb2 as memory_pb2
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError


class ExecutorRuns:
    """Starts runs on the executor pool and streams their events into the caller's sink.

    Where a run goes, and whether a refused one fails over, is the RunRouter's business (the
    same router the gateway sends chats with); this turns the run's events into how it ended.
    """

    def __init__(
        self, router: RunRouter, *, a2a: RemoteA2AAgents | None = None, placement_seconds: float = 0.0
    ) -> None:
        self._router = router
        # How long a run waits for an executor to take it when every one refuses it for now.
        self._placement_seconds = placement_seconds
        # Remote A2A agents of the project (delegation/a2a.py); None where none are reachable.
        self.a2a = a2a

    def system_metadata(self) -> Metadata | None:
        """The mesh's own credentials (for the executor's calls made as itself)."""
        return self._router.system_metadata()

    async def run(
        self,
        request: executor_service_pb2.RunRequest,
        sink: EventSink,
        *,
        timeout_seconds: float | None = None,
        log: ChildLog | None = None,
        follow_timeout_seconds: float | None = None,
    ) -> ChildOutcome:
        """Runs `request` on an executor, forwarding every event it streams (its own and those
        of the runs below it) to `sink`, and returns how the run ended. With `log`: when the
        stream breaks after the run started, its end is read from the log once recorded (up to
        `follow_timeout_seconds`, else `timeout_seconds`; the events it records meanwhile stay
        in the log, they are not forwarded)."""
        own_path = tuple(request.delegation_path)
        own_run = ""
        outcome: ChildOutcome | None = None
        run = self._router.run(request, timeout=timeout_seconds, placement_seconds=self._placement_seconds)
        try:
            # Closed at once when this run is cancelled, which cancels the run below.
            async with contextlib.aclosing(run):
                async for event in run:
                    if (
                        not own_run
                        and event.HasField("run_started")
                        and tuple(event.delegation_path) == own_path
                    ):
                        own_run = event.run_id
                    if own_run and event.run_id == own_run:
                        if event.HasField("run_completed"):
                            done = event.run_completed
                            outcome = ChildOutcome(
                                completed=True,
                                content=done.content,
                                usage=usage_from_proto(done.usage),
                                escalated=done.escalated,
                            )
                        elif event.HasField("run_failed"):
                            failed = event.run_failed
                            outcome = ChildOutcome(
                                code=failed.code,
                                message=failed.message,
                                usage=usage_from_proto(failed.usage) if failed.HasField("usage") else Usage(),
                            )
                        elif event.HasField("run_suspended"):
                            # Not streamed on: the caller suspends in turn, and its own
                            # `run_suspended` names these requests to whoever listens above.
                            waits = SuspendedBelow(own_run, tuple(event.run_suspended.request_ids))
                            outcome = ChildOutcome(code="SUSPENDED", suspended=waits)
                            continue
                    await sink.emit(event)
        except RunNotPlaced as refused:
            return ChildOutcome(code=refused.last.code.name, message=refused.last.message)
        except DomainError as error:
            if own_run and log is not None and error.code.name == "UNAVAILABLE":
                return await follow(log, own_run, follow_timeout_seconds or timeout_seconds)
            return ChildOutcome(code=error.code.name, message=error.message)
        if outcome is None and own_run and log is not None:
            return await follow(log, own_run, follow_timeout_seconds or timeout_seconds)
        return outcome or ChildOutcome(code="INTERNAL", message="the run ended without an answer")


async def follow(log: ChildLog, run_id: str, timeout_seconds: float | None) -> ChildOutcome:
    """How the child run `run_id` ended, waited for in the log (its stream broke: it goes on, or
    is resumed, elsewhere) up to `timeout_seconds`."""
    try:
        async with asyncio.timeout(timeout_seconds):
            end = await log.wait_end(run_id)
    except TimeoutError:
        return ChildOutcome(code="DEADLINE_EXCEEDED", message="its run did not end in time")
    return logged_outcome(end)


def logged_outcome(end: memory_pb2.Event) -> ChildOutcome:
    """A child run's outcome from its recorded final event (answer, escalation, tokens)."""
    completed, text, code = end_outcome(end)
    meta = end.metadata.fields
    usage = usage_from_struct(meta["tree_usage"].struct_value) if "tree_usage" in meta else None
    if usage is None:  # recorded without the tree's usage: its own tokens, its cost unknown
        tokens = {
            name: int(meta[name].number_value) for name in ("input_tokens", "output_tokens") if name in meta
        }
        usage = Usage(**tokens, unpriced=frozenset({"unknown"}))
    return ChildOutcome(
        completed=completed,
        content=text,
        code=code,
        message=text,
        usage=usage,
        escalated="escalated" in meta and meta["escalated"].bool_value,
    )


def child_request(scope: RunScope, agent: str, text: str, **fields: Any) -> executor_service_pb2.RunRequest:
    """The request of a run `scope`'s run starts on the pool (a delegated or sub-agent run): one
    level deeper in the same session, naming its caller's run, which follows it in the log."""
    return executor_service_pb2.RunRequest(
        project_slug=scope.spec.project_slug,
        agent_name=agent,
        session_id=scope.session_id,
        input=text,
        delegation_depth=scope.depth + 1,
        delegation_path=scope.origin.child_path,
        caller_run_id=scope.origin.run_id,
        caller_resume=scope.recorder.resume,
        tree_start_seq=scope.tree_start_seq,
        budget=remaining_budget(scope),
        **fields,
    )
