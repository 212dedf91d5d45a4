"""Builders for the RunEvent messages a run streams (proto construction kept in one place)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.models.base import Usage


@dataclass(frozen=True)
class RunContext:
    """Where a run's events come from: its run, session, agent and delegation path."""

    run_id: str
    session_id: str
    agent: str
    delegation_path: tuple[str, ...] = field(default_factory=tuple)

    def event(self, seq: int = 0, **kind: object) -> run_pb2.RunEvent:
        return run_pb2.RunEvent(
            run_id=self.run_id,
            session_id=self.session_id,
            agent=self.agent,
            delegation_path=self.delegation_path,
            seq=seq,
            **kind,
        )


def usage_proto(usage: Usage) -> run_pb2.Usage:
    return run_pb2.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost)
