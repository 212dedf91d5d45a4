"""The bounds on the tree of runs under one chat, checked by the delegating run before anything
is sent: its depth, re-entry into its own delegation path, delegations per model step and per
chat (docs/executor.md, "Bounded delegation trees"). A delegation past a bound is refused with a
reason the model reads as the delegation's result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.durability.recorder import EventType
from agentmesh.executor.errors import (
    DELEGATION_CYCLE,
    DELEGATION_NOT_ALLOWED,
    DELEGATIONS_PER_CHAT_EXCEEDED,
    DELEGATIONS_PER_STEP_EXCEEDED,
    DelegationDepthExceeded,
)
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2


class Bounded(Protocol):
    """A delegation a step plans: where to, and why it may not be sent (None: it may)."""

    target: str
    refused: tuple[str, str] | None


B = TypeVar("B", bound=Bounded)


class TreeBounds:
    """The executor's defaults for agent types that set no bounds of their own, and the log where
    a chat's tree counts its delegations (`memory`: none, and nothing is counted)."""

    def __init__(
        self, *, max_depth: int, max_per_step: int, max_per_chat: int, memory: MemoryClient | None
    ) -> None:
        self._max_depth = max_depth
        self._max_per_step = max_per_step
        self._max_per_chat = max_per_chat
        self._memory = memory

    def refusal(self, scope: RunScope, target: str) -> tuple[str, str] | None:
        """Why `scope`'s agent may not delegate to `target` (reason, message), or None. `target`
        is a slug (see `target_slug`)."""
        allowed = list(scope.spec.network_access)
        if target not in allowed:
            return (
                DELEGATION_NOT_ALLOWED,
                f"{scope.agent} may not delegate to {target!r}: its network access is "
                f"{', '.join(allowed) if allowed else 'empty'}",
            )
        if scope.depth + 1 > self._max_depth:
            return (
                DelegationDepthExceeded.default_reason,
                f"delegating to {target!r} would nest {scope.depth + 1} delegations deep; the limit is "
                f"{self._max_depth}",
            )
        path = scope.origin.child_path
        if target in path and not scope.spec.delegation_limits.allow_reentry:
            return (
                DELEGATION_CYCLE,
                f"{target!r} is already on this delegation path ({' → '.join(path)}); delegating to it "
                "again would make a cycle, which the agent type does not allow",
            )
        return None

    async def limit_step(self, scope: RunScope, sendable: Sequence[B]) -> list[B]:
        """Of a model step's `sendable` delegations, in order, those past the type's delegations
        per step, or once the chat's tree sent its delegations per chat, are refused (their
        `refused` set); returns them. The tree's count is read from the session's log (its
        `delegation_request`s after the chat's input), so it holds across executors; steps of the
        tree that count at the same time may together pass the bound by what they send at once."""
        limits = scope.spec.delegation_limits
        per_step = limits.max_per_step or self._max_per_step
        per_chat = limits.max_per_chat or self._max_per_chat
        sent = await self._tree_delegations(scope)
        refused: list[B] = []
        for place, delegation in enumerate(sendable):
            if place >= per_step:
                delegation.refused = (
                    DELEGATIONS_PER_STEP_EXCEEDED,
                    f"one step may delegate at most {per_step} times; delegating to {delegation.target!r} "
                    "as well was refused: ask for it in a later step",
                )
            elif sent >= per_chat:
                delegation.refused = (
                    DELEGATIONS_PER_CHAT_EXCEEDED,
                    f"this chat has delegated {sent} times, its limit: delegating to {delegation.target!r} "
                    "was refused: answer with what you have",
                )
            else:
                sent += 1
                continue
            refused.append(delegation)
        return refused

    async def _tree_delegations(self, scope: RunScope) -> int:
        """How many delegations the tree of `scope`'s chat recorded so far."""
        if self._memory is None:
            return 0
        page = await self._memory.list_events(
            memory_service_pb2.ListEventsRequest(
                session_id=scope.session_id,
                project_id=scope.recorder.project_id,
                event_types=[EventType.EVENT_TYPE_DELEGATION_REQUEST],
                after_seq=scope.tree_start_seq,
                page_size=1,
                include_total_size=True,
            )
        )
        return page.total_size
