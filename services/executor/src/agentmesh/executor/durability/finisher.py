"""Reports the ends of runs to the registry, many runs per call when many end together.

A run hands its end (`FinishAgentRun`: whether it completed, its usage) over and is done: its
stream ended with its answer already, and nobody waits for the registry. The finisher sends what
has gathered with one `FinishAgentRuns` call: it waits `window_seconds` after the first end of a
batch (so that ends arriving together go together), sends at most `max_batch` runs per call, and
has one call in flight at a time. Under load that is one registry call for many runs instead of
one each; at rest it delays an agent's `idle` by the window.

The executor's own system token is used when it has one (the caller's may have expired by the
time a run ends); without one, each run's end goes with its caller's token, and runs of different
callers go in different calls. Finishing is idempotent in the registry, so a call whose answer
was lost is simply sent again.

It is an outbox: an end the registry did not take (unreachable, restarting, failing) is kept and
sent again, with backoff, until it is taken — never dropped after some seconds of retries, which
used to leave agents `working`. The run's lease is renewed meanwhile (`pending_runs`), so nobody
takes the run over. Only at shutdown is sending bounded (`timeout_seconds`); what is left then
is settled by the leases: the runs expire and another executor closes them.

A run's end waits while its final event is still kept by the event outbox (`held_back`): the
registry deletes a finished run's lease, and a run whose lease is gone while its final event is
not recorded would end nowhere if this executor died then — nobody would take it over. Held back,
its lease is renewed until the event is recorded (the outbox then `wake`s the finisher), and if
this executor dies first the run's taker records the end. (Found by the memory-kill fault test:
ends reached the registry before their events reached memory, and the renewals of those runs then
came back `lost` every half second.)

A run that is its session's turn (a user's message under a double-texting policy) hands its end
over before its caller sees it end, and waits until the registry has taken it (`finish` returns
that as a future; such an end skips the window): the turn is released with the answer, so the
caller's next message finds its session free. A run whose end is held back, or a registry that
does not answer, delays the caller's last event by at most the run's wait (`release_turn`), then
the turn is released when the end is delivered.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry import trace

from agentmesh.executor.durability.transient import is_transient
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import bearer_metadata, current_token
from agentmesh.runtime.telemetry import (
    FINISH_RUNS_SPAN,
    RUN_COUNT,
    batch_span,
    current_span_context,
    untraced,
)

logger = logging.getLogger(__name__)

_RETRY_SECONDS = 0.2
_MAX_RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class _End:
    run: registry_internal_service_pb2.FinishAgentRunRequest
    metadata: Metadata | None
    span: trace.SpanContext | None  # the run's, to link the batch's span to
    taken: asyncio.Future[None]  # done once the registry took the end (or it was given up)
    urgent: bool  # a session's turn waits on it: sent without the window


class RunFinisher:
    """Batches `FinishAgentRun`s into `FinishAgentRuns` calls, in a background task."""

    def __init__(
        self,
        registry: RegistryClient,
        *,
        system_metadata: Callable[[], Metadata | None],
        window_seconds: float,
        max_batch: int,
        timeout_seconds: float,
        held_back: Callable[[], set[str]] = set,
    ) -> None:
        self._registry = registry
        self._held_back = held_back
        self._system_metadata = system_metadata
        self._window = window_seconds
        self._max_batch = max_batch
        self._timeout = timeout_seconds
        self._ends: collections.deque[_End] = collections.deque()
        self._sending: list[_End] = []
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()  # cuts the window short: stopping, or a turn waits

    def start(self) -> None:
        with untraced():
            self._task = asyncio.create_task(self._run(), name="run finisher")

    def finish(
        self,
        agent_id: str,
        run_id: str,
        *,
        completed: bool,
        tokens_used: int,
        cost: float,
        cancelled: bool = False,
        session_id: str = "",
        user_id: str = "",
        model_usage: Sequence[registry_internal_service_pb2.ModelUsage] = (),
        urgent: bool = False,
    ) -> asyncio.Future[None]:
        """Hands a run's end over (`cancelled`: it was cancelled, not failed), with its entries
        for the cost ledger (`model_usage`); the registry hears of it shortly (`urgent`: at once,
        without the window). The future is done once the registry took it, or it was given up."""
        run = registry_internal_service_pb2.FinishAgentRunRequest(
            agent_id=agent_id,
            run_id=run_id,
            completed=completed,
            cancelled=cancelled,
            tokens_used=tokens_used,
            cost=cost,
            session_id=session_id,
            user_id=user_id,
            model_usage=model_usage,
        )
        metadata = bearer_metadata(current_token.get())  # sent as the executor when it has a token
        taken = asyncio.get_running_loop().create_future()
        self._ends.append(_End(run, metadata, current_span_context(), taken, urgent))
        self._arrived.set()
        if urgent:
            self._hurry.set()
        return taken

    def forget(self, run_id: str) -> None:
        """Drops the end of a run held back here that went on elsewhere (its kept final event was
        refused as an earlier incarnation's, outbox.py): its taker reports its end."""
        forgotten = [end for end in self._ends if end.run.run_id == run_id]
        _settle(forgotten)
        self._ends = collections.deque(end for end in self._ends if end.run.run_id != run_id)
        self._arrived.set()

    def wake(self) -> None:
        """Looks again at the ends held back (a run's final event was recorded)."""
        self._arrived.set()

    @property
    def pending(self) -> int:
        """Ends not sent yet."""
        return len(self._ends)

    def pending_runs(self) -> list[tuple[str, str]]:
        """(agent id, run id) of every end not taken by the registry yet: their leases stay."""
        return [(end.run.agent_id, end.run.run_id) for end in (*self._sending, *self._ends)]

    async def stop(self) -> None:
        """Sends every end handed over so far, then stops."""
        if self._task is None:
            return
        self._stopping.set()
        self._hurry.set()
        self._arrived.set()
        await self._task
        self._task = None

    async def _run(self) -> None:
        while not (self._stopping.is_set() and not self._ends):
            await self._arrived.wait()
            if self._window and not self._urgent_ready():
                # The window, unless stopping (then everything goes at once) or a turn waits.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hurry.wait(), self._window)
            if not self._stopping.is_set():
                self._hurry.clear()
            self._arrived.clear()
            while ready := self._take_ready():
                batch: dict[tuple[tuple[str, str], ...], list[_End]] = {}
                for end in ready:
                    batch.setdefault(tuple(self._system_metadata() or end.metadata or ()), []).append(end)
                self._sending = ready
                await asyncio.gather(*(self._send(ends, metadata) for metadata, ends in batch.items()))
                self._sending = []
            if self._stopping.is_set() and self._ends:
                # Their final events were not recorded: their leases expire and their takers
                # record the ends and count them out.
                logger.warning("%d run ends held back at shutdown are left to their leases", len(self._ends))
                _settle(self._ends)
                self._ends.clear()

    def _urgent_ready(self) -> bool:
        """Whether an end a session's turn waits on can go now (not held back)."""
        urgent = [end.run.run_id for end in self._ends if end.urgent]
        return bool(urgent) and not set(urgent) <= self._held_back()

    def _take_ready(self) -> list[_End]:
        """Up to `max_batch` ends, oldest first, leaving those held back in place."""
        held = self._held_back() if self._ends else set()
        ready: list[_End] = []
        kept: collections.deque[_End] = collections.deque()
        while self._ends and len(ready) < self._max_batch:
            end = self._ends.popleft()
            (kept if end.run.run_id in held else ready).append(end)
        kept.extend(self._ends)
        self._ends = kept
        return ready

    async def _send(self, ends: list[_End], metadata: tuple[tuple[str, str], ...]) -> None:
        # The call belongs to every run it reports: a trace of its own, linked to each run's.
        linked = [end.span for end in ends if end.span is not None]
        try:
            with batch_span(FINISH_RUNS_SPAN, linked, **{RUN_COUNT: len(ends)}):
                await self._send_runs([end.run for end in ends], metadata)
        finally:
            _settle(ends)

    async def _send_runs(
        self,
        runs: list[registry_internal_service_pb2.FinishAgentRunRequest],
        metadata: tuple[tuple[str, str], ...],
    ) -> None:
        deadline: float | None = None
        backoff = _RETRY_SECONDS
        while True:
            if deadline is None and self._stopping.is_set():
                deadline = time.monotonic() + self._timeout
            try:
                async with asyncio.timeout(self._timeout):
                    results = await self._registry.finish_agent_runs(runs, metadata=metadata or None)
                break
            except (DomainError, TimeoutError) as error:
                if not is_transient(error) or (
                    deadline is not None and time.monotonic() + backoff >= deadline
                ):
                    logger.error("could not report the end of %d runs to the registry: %s", len(runs), error)
                    return
                if backoff == _RETRY_SECONDS:
                    logger.warning(
                        "the registry did not take the end of %d runs (%s); kept", len(runs), error
                    )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_RETRY_SECONDS)
            except Exception as error:  # the finisher must outlive any one failed call
                logger.error("could not report the end of %d runs to the registry: %s", len(runs), error)
                return
        for run, result in zip(runs, results, strict=True):
            if result.error_code:
                logger.warning(
                    "the registry refused the end of run %s of agent %s: %s %s",
                    run.run_id,
                    run.agent_id,
                    result.error_code,
                    result.error_message,
                )


def _settle(ends: Iterable[_End]) -> None:
    """Tells whoever waits on these ends that the finisher is done with them."""
    for end in ends:
        if not end.taken.done():
            end.taken.set_result(None)
