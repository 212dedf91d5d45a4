"""Agents' changes pushed to executors as they commit (`WatchAgents`): an executor that
watches keeps its remembered specs fresh and refuses a terminated agent's runs at once, without
asking the registry at every run.

The registry's rules publish each committed change here, after its transaction; every open watch
has its own bounded queue. A watcher too slow to take its changes (its queue full) is not
blocked on and not dropped: its queue is cleared and it gets a reset instead, which tells it to
forget everything it remembers — always correct, only dearer. A change that may alter many
agents' specs at once (an agent type, a project, an MCP server) is a reset for everyone too.

Changes reach the watchers of this registry process. With several registry replicas a change
made through another replica is not pushed here; the executors' runs still start at the
registry (`StartAgentRun`), which refuses a paused agent's run and answers the spec's revision,
so a missed push costs a round trip, never a wrong run (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agentmesh.registry.models import AgentStatus

MAX_QUEUED_CHANGES = 1000


@dataclass(frozen=True)
class AgentChange:
    """One committed change to one agent: its new status (None when only its spec changed)."""

    agent_id: str
    status: AgentStatus | None = None
    spec_changed: bool = False


@dataclass
class WatchBatch:
    """What a watcher takes at once: a reset (forget everything first), then changes in order."""

    reset: bool = False
    changes: list[AgentChange] = field(default_factory=list)
    runs_ready: bool = False  # a suspended run may be ready to be taken over now


class _Watcher:
    def __init__(self) -> None:
        self.pending = WatchBatch(reset=True)  # a new watch starts from a reset
        self.ready = asyncio.Event()
        self.ready.set()
        self.closed = False

    def add(self, change: AgentChange | None) -> None:
        if change is None or len(self.pending.changes) >= MAX_QUEUED_CHANGES:
            self.pending = WatchBatch(reset=True, runs_ready=self.pending.runs_ready)
        else:
            self.pending.changes.append(change)
        self.ready.set()

    def runs_ready(self) -> None:
        self.pending.runs_ready = True
        self.ready.set()

    async def take(self) -> WatchBatch | None:
        """The next batch, once there is one; None once the registry is stopping."""
        await self.ready.wait()
        self.ready.clear()
        if self.closed:
            return None
        batch, self.pending = self.pending, WatchBatch()
        return batch


class AgentWatch:
    """Fans committed agent changes out to every open watch."""

    def __init__(self) -> None:
        self._watchers: set[_Watcher] = set()
        self._closed = False

    def changed(self, change: AgentChange) -> None:
        """An agent's change committed."""
        for watcher in self._watchers:
            watcher.add(change)

    def reset(self) -> None:
        """A change committed that may alter any agent's spec: every watcher forgets all."""
        for watcher in self._watchers:
            watcher.add(None)

    def runs_ready(self) -> None:
        """A person responded to a suspended run's request: every watching executor renews its
        leases at once, and the one whose renewal claims the run resumes it (with no push it
        would be claimed at the next renewal interval)."""
        for watcher in self._watchers:
            watcher.runs_ready()

    def close(self) -> None:
        """Ends every watch (the registry is stopping: its watchers reconnect to another)."""
        self._closed = True
        for watcher in self._watchers:
            watcher.closed = True
            watcher.ready.set()

    @contextlib.asynccontextmanager
    async def watch(self) -> AsyncIterator[_Watcher]:
        """A watch from now on: `take()` its batches, the first a reset."""
        watcher = _Watcher()
        watcher.closed = self._closed
        self._watchers.add(watcher)
        try:
            yield watcher
        finally:
            self._watchers.discard(watcher)
