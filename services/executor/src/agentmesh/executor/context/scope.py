"""What a run's loop and the runs it delegates see of it (`RunScope`), and what it gives back
(`RunResult`, or `RunFailure`). The run itself, from its admission to its end, is `Run`
(run/run.py), above the loops: it makes its scope when its loop begins."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.events import EventOrigin, EventSink
from agentmesh.executor.durability.recorder import EventType, Recorder
from agentmesh.executor.providers.base import Usage
from agentmesh.internal.executor.v1 import executor_service_pb2
from agentmesh.registry.v1 import resources_pb2


class RunFailure(Exception):
    """A run cannot produce an answer: it ends with RunFailed (code is a gRPC status name)."""

    def __init__(self, code: str, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or code


@dataclass
class RunResult:
    """How a run ended with an answer. `usage` is the agent's own (model calls); `total_usage`
    adds everything run below it (delegations, sub-agents)."""

    content: str = ""
    usage: Usage = field(default_factory=Usage)
    total_usage: Usage = field(default_factory=Usage)
    steps: int = 0
    max_steps_reached: bool = False
    escalated: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelTally:
    """A run's calls of one model, and what they used."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)


@dataclass
class UsageMeter:
    """What a run's own model calls used, per model (its delegations meter their own): what the
    run reports to the cost ledger at its end, whether it answered or not; and `below`, what the
    runs it delegated to (or ran as sub-agents) reported they used, so `tree` is what its budget
    counts."""

    by_model: dict[str, ModelTally] = field(default_factory=dict)
    below: Usage = field(default_factory=Usage)

    def add(self, model: str, usage: Usage) -> None:
        tally = self.by_model.setdefault(model, ModelTally())
        tally.calls += 1
        tally.usage += usage

    @property
    def total(self) -> Usage:
        total = Usage()
        for tally in self.by_model.values():
            total += tally.usage
        return total

    @property
    def tree(self) -> Usage:
        return self.total + self.below


@dataclass
class RunScope:
    """The view of a `Run` its loop gets (and passes to the tools and delegations below it): its
    request, its agent's spec, where its events come from (`origin`) and go (`sink`), how they
    are recorded, and its input's event once recorded. The `Run` keeps none of these twice."""

    request: executor_service_pb2.RunRequest
    spec: resources_pb2.AgentSpec
    origin: EventOrigin
    recorder: Recorder
    sink: EventSink
    input_event_id: str = ""
    input_seq: int = 0  # its input event's seq, once recorded
    meter: UsageMeter = field(default_factory=UsageMeter)

    @property
    def tree_start_seq(self) -> int:
        """Where the delegation tree this run belongs to starts in the session: after the input
        of the chat at its root (this run's own input when it is that chat)."""
        return self.request.tree_start_seq or self.input_seq

    @property
    def agent(self) -> str:
        """The agent's slug: how events and delegations name it (its name may be any text)."""
        return self.origin.agent

    @property
    def session_id(self) -> str:
        return self.origin.session_id

    @property
    def depth(self) -> int:
        return self.request.delegation_depth

    async def error(self, reason: str, message: str, *, metadata: dict[str, Any] | None = None) -> None:
        """Records and streams an error the run recovers from."""
        event = await self.recorder.record(
            EventType.EVENT_TYPE_ERROR,
            message,
            metadata={"reason": reason, **(metadata or {})},
            parent_event_id=self.input_event_id,
        )
        await self.sink.emit(
            self.origin.event(seq=event.seq, error=run_pb2.RunError(reason=reason, message=message))
        )
