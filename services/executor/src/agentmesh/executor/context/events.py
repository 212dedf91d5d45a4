"""The events a run streams: where they come from (`EventOrigin`, which stamps each RunEvent with
its run, session, agent and delegation path: proto construction in one place) and the sink a run
and everything below it (tool calls, delegations, sub-agents) emit into."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import struct_pb2

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.providers.base import Usage
from agentmesh.executor.providers.secrets import Secrets
from agentmesh.runtime.batching import merge_text_deltas, next_batch


@dataclass(frozen=True)
class EventOrigin:
    """Where a run's events come from: its run, session, agent and delegation path, stamped on
    each event it makes (`event`). A run has one (`RunScope.origin`); a remote A2A task streams
    its steps from one of its own, below the run that delegated to it."""

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

    @property
    def child_path(self) -> tuple[str, ...]:
        """The delegation path of the runs this one starts (delegations, sub-agents)."""
        return (*self.delegation_path, self.agent)


def usage_proto(usage: Usage) -> run_pb2.Usage:
    return run_pb2.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost=usage.cost,
        cached_input_tokens=usage.cached_input_tokens,
        cost_known=usage.cost_known,
        unpriced_models=sorted(usage.unpriced),
    )


def usage_from_proto(usage: run_pb2.Usage) -> Usage:
    """A reported usage. One that says its cost is unknown without naming a model (an older
    executor, a remote agent) names "unknown", so the cost stays unknown up the tree."""
    unpriced = frozenset(usage.unpriced_models)
    if not usage.cost_known and not unpriced:
        unpriced = frozenset({"unknown"})
    return Usage(usage.input_tokens, usage.output_tokens, usage.cost, usage.cached_input_tokens, unpriced)


def usage_from_struct(value: struct_pb2.Struct) -> Usage:
    """A usage written as JSON (an A2A task's `agentmesh.usage`, a run end's `tree_usage`):
    tokens, the cost (null: unknown) and the unpriced models."""
    fields = value.fields

    def count(name: str) -> int:
        return int(fields[name].number_value) if name in fields else 0

    unpriced: frozenset[str] = frozenset()
    if "unpriced_models" in fields:
        unpriced = frozenset(item.string_value for item in fields["unpriced_models"].list_value.values)
    cost = fields.get("cost")
    if cost is None or not cost.HasField("number_value"):
        unpriced = unpriced or frozenset({"unknown"})
    return Usage(
        count("input_tokens"),
        count("output_tokens"),
        cost.number_value if cost is not None and cost.HasField("number_value") else 0.0,
        count("cached_input_tokens"),
        unpriced,
    )


_DONE = object()


class EventSink:
    """A bounded queue of a run's events: producers (the run, its tool calls, delegations and
    sub-agents) `emit`; the caller's stream drains. Bounded, so a slow reader slows the run
    instead of buffering without limit."""

    def __init__(self, maxsize: int, *, secrets: Secrets | None = None) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._slots = asyncio.Semaphore(maxsize)
        # Every event leaves scrubbed of the executor's secrets: none may reach a client.
        self._secrets = secrets or Secrets()

    async def emit(self, event: run_pb2.RunEvent) -> None:
        self._secrets.scrub_message(event)
        await self._slots.acquire()
        self._queue.put_nowait((event, True))

    def emit_last(self, event: run_pb2.RunEvent) -> None:
        """Queues a run's last event without waiting (a cancelled run cannot wait for room)."""
        self._secrets.scrub_message(event)
        self._queue.put_nowait((event, False))

    def close(self) -> None:
        """Ends the stream after the events queued so far: the run has answered, and what it
        still does (bookkeeping) is none of the caller's business."""
        self._queue.put_nowait(_DONE)

    async def drain_batches(self, producer: asyncio.Task[Any]) -> AsyncIterator[list[run_pb2.RunEvent]]:
        """The events until the sink is closed or `producer` ends, then the producer's exception
        if it raised one; in batches: each batch is every event queued by the time the reader asks
        for more — the first event as soon as it is emitted, then what was emitted while the
        reader was busy sending the batch before (fewer, fuller messages; one
        message carrying several events costs a fraction of one message per event). Text deltas
        of one run that queued together leave as one (`merge_text_deltas`)."""
        producer.add_done_callback(lambda _: self._queue.put_nowait(_DONE))
        done = False
        while not done:
            items, done = await next_batch(self._queue, _DONE)
            batch: list[run_pb2.RunEvent] = []
            for event, took_slot in items:
                if took_slot:
                    self._slots.release()
                batch.append(event)
            if batch:
                yield merge_text_deltas(batch)
        if producer.done() and not producer.cancelled() and producer.exception() is not None:
            raise producer.exception()  # type: ignore[misc]
