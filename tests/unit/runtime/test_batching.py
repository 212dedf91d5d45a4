"""`batched` and the executor's `EventSink`: what queued up while the reader was busy leaves as
one batch, the first item never waits, order and errors are kept, and closing early stops the
source."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.events import EventSink
from agentmesh.runtime.batching import batched

pytestmark = pytest.mark.asyncio


async def test_items_that_queued_while_the_reader_was_busy_leave_together() -> None:
    release = asyncio.Event()

    async def source() -> AsyncIterator[int]:
        yield 1
        await release.wait()
        for item in range(2, 6):
            yield item

    batches = batched(source())
    assert await anext(batches) == [1]  # the first leaves alone, at once
    release.set()
    await asyncio.sleep(0)  # the reader is busy; the source goes on meanwhile
    await asyncio.sleep(0)
    assert [batch async for batch in batches] == [[2, 3, 4, 5]]


async def test_a_failing_source_raises_after_the_items_before_it() -> None:
    async def source() -> AsyncIterator[int]:
        yield 1
        yield 2
        raise ValueError("broken")

    seen: list[int] = []
    with pytest.raises(ValueError, match="broken"):
        async for batch in batched(source()):
            seen.extend(batch)
    assert seen == [1, 2]


async def test_closing_early_closes_the_source() -> None:
    closed = asyncio.Event()

    async def source() -> AsyncIterator[int]:
        try:
            for item in range(1000):
                yield item
                await asyncio.sleep(0)
        finally:
            closed.set()

    batches = batched(source())
    await anext(batches)
    await batches.aclose()
    assert closed.is_set()


async def test_the_event_sink_sends_what_was_emitted_meanwhile_as_one_batch() -> None:
    sink = EventSink(8)
    emitted = asyncio.Event()

    async def run() -> None:
        await sink.emit(run_pb2.RunEvent(run_id="r", seq=1))
        await emitted.wait()
        for seq in (2, 3, 4):
            await sink.emit(run_pb2.RunEvent(run_id="r", seq=seq))
        sink.close()

    producer = asyncio.create_task(run())
    batches = sink.drain_batches(producer)
    assert [e.seq for e in await anext(batches)] == [1]
    emitted.set()
    await asyncio.sleep(0)
    assert [[e.seq for e in batch] async for batch in batches] == [[2, 3, 4]]
    await producer


async def test_the_event_sink_keeps_its_bound_with_batches() -> None:
    sink = EventSink(2)
    producer = asyncio.create_task(asyncio.sleep(3600))
    await sink.emit(run_pb2.RunEvent(seq=1))
    await sink.emit(run_pb2.RunEvent(seq=2))
    third = asyncio.create_task(sink.emit(run_pb2.RunEvent(seq=3)))
    await asyncio.sleep(0)
    assert not third.done()  # no room until the reader takes some
    batches = sink.drain_batches(producer)
    assert [e.seq for e in await anext(batches)] == [1, 2]
    await third
    assert [e.seq for e in await anext(batches)] == [3]
    producer.cancel()
