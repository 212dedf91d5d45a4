"""`batched` and the executor's `EventSink`: what queued up while the reader was busy leaves as
one batch, the first item never waits, order and errors are kept, closing early stops the
source, and text deltas that queued together merge (every character kept, in order)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.events import EventSink
from agentmesh.runtime.batching import Coalescer, batched, merge_text_deltas


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


def _delta(text: str, *, run_id: str = "r", agent: str = "a", path: tuple[str, ...] = ()) -> run_pb2.RunEvent:
    return run_pb2.RunEvent(
        run_id=run_id,
        session_id="s",
        agent=agent,
        delegation_path=path,
        text_delta=run_pb2.TextDelta(text=text),
    )


def _shape(events: list[run_pb2.RunEvent]) -> list[tuple[str, str]]:
    return [
        (e.WhichOneof("kind") or "", e.text_delta.text if e.HasField("text_delta") else e.run_id)
        for e in events
    ]


def test_consecutive_deltas_of_one_run_merge_into_one() -> None:
    started = run_pb2.RunEvent(run_id="r", run_started=run_pb2.RunStarted())
    done = run_pb2.RunEvent(run_id="r", seq=2, run_completed=run_pb2.RunCompleted(content="Hello, world"))
    events = [started, _delta("Hel"), _delta("lo, "), _delta("world"), done]

    merged = merge_text_deltas(events)

    assert _shape(merged) == [("run_started", "r"), ("text_delta", "Hello, world"), ("run_completed", "r")]
    assert merged[0] is started and merged[-1] is done
    assert [e.text_delta.text for e in events[1:4]] == ["Hel", "lo, ", "world"]  # not changed in place


def test_deltas_of_different_runs_or_paths_or_with_a_seq_are_not_merged() -> None:
    events = [
        _delta("a"),
        _delta("b", run_id="child", agent="worker", path=("a",)),
        _delta("c", run_id="child", agent="worker", path=("a",)),
        _delta("d"),
        run_pb2.RunEvent(
            run_id="r", session_id="s", agent="a", seq=7, text_delta=run_pb2.TextDelta(text="e")
        ),
        _delta("f"),
        run_pb2.RunEvent(run_id="r", step_started=run_pb2.StepStarted(step=2)),
        _delta("g"),
    ]

    merged = merge_text_deltas(events)

    assert [e.text_delta.text or e.WhichOneof("kind") for e in merged] == [
        "a",
        "bc",
        "d",
        "e",
        "f",
        "step_started",
        "g",
    ]
    assert merged[3].seq == 7
    assert "".join(e.text_delta.text for e in merged) == "abcdefg"


async def test_the_event_sink_merges_the_deltas_that_queued_while_the_reader_was_busy() -> None:
    sink = EventSink(16)
    more = asyncio.Event()

    async def run() -> None:
        await sink.emit(_delta("The "))
        await more.wait()
        for text in ("answer ", "is ", "42"):
            await sink.emit(_delta(text))
        sink.close()

    producer = asyncio.create_task(run())
    batches = sink.drain_batches(producer)
    assert _shape(await anext(batches)) == [("text_delta", "The ")]  # the first leaves at once
    more.set()
    await asyncio.sleep(0)
    assert [_shape(batch) async for batch in batches] == [[("text_delta", "answer is 42")]]
    await producer


class _Appends:
    """A `send` for the Coalescer that records each call and holds it until released."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None
        self._called = asyncio.Condition()

    async def send(self, items: list[str]) -> list[str]:
        async with self._called:
            self.calls.append(items)
            self._called.notify_all()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return [item.upper() for item in items]

    async def until_called(self, times: int) -> None:
        async with self._called:
            await self._called.wait_for(lambda: len(self.calls) >= times)


async def test_a_lone_caller_sends_at_once_and_what_comes_meanwhile_goes_together_next() -> None:
    appends = _Appends()
    coalescer: Coalescer[str, str] = Coalescer(appends.send)
    first = asyncio.create_task(coalescer.submit(["a"]))
    await appends.until_called(1)
    assert appends.calls == [["a"]]  # sent at once, alone
    second = asyncio.create_task(coalescer.submit(["b", "c"]))
    third = asyncio.create_task(coalescer.submit(["d"]))
    await asyncio.sleep(0)
    assert appends.calls == [["a"]]  # the others wait for the call in flight
    appends.release.set()
    assert await first == ["A"]
    assert await second == ["B", "C"]
    assert await third == ["D"]
    assert appends.calls == [["a"], ["b", "c", "d"]]


async def test_every_caller_of_a_failed_call_gets_its_error() -> None:
    appends = _Appends()
    coalescer: Coalescer[str, str] = Coalescer(appends.send)
    first = asyncio.create_task(coalescer.submit(["a"]))
    await appends.until_called(1)
    second = asyncio.create_task(coalescer.submit(["b"]))
    third = asyncio.create_task(coalescer.submit(["c"]))
    await asyncio.sleep(0)
    appends.fail = ValueError("refused")
    appends.release.set()
    with pytest.raises(ValueError):
        await first
    for waiting in (second, third):  # sent together after the first, and refused together
        with pytest.raises(ValueError):
            await waiting
    assert appends.calls == [["a"], ["b", "c"]]


async def test_a_cancelled_waiter_takes_its_items_back_and_a_cancelled_sender_hands_over() -> None:
    appends = _Appends()
    coalescer: Coalescer[str, str] = Coalescer(appends.send)
    first = asyncio.create_task(coalescer.submit(["a"]))
    await appends.until_called(1)
    gone = asyncio.create_task(coalescer.submit(["x"]))
    second = asyncio.create_task(coalescer.submit(["b"]))
    third = asyncio.create_task(coalescer.submit(["c"]))
    await asyncio.sleep(0)
    gone.cancel()  # still waiting: its item is not sent
    first.cancel()  # the caller sending ["a"] goes, and its call with it
    await appends.until_called(2)
    assert appends.calls[1] == ["b", "c"]  # one of the others sends what is left, together
    await asyncio.sleep(0)
    # The sender of ["b", "c"] (the first waiter woken) goes too: "c" is sent again, by its caller.
    second.cancel()
    await appends.until_called(3)
    assert appends.calls[2] == ["c"]
    appends.release.set()
    assert await third == ["C"]
    for cancelled in (gone, first, second):
        with pytest.raises(asyncio.CancelledError):
            await cancelled
