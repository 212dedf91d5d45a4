"""Fewer, fuller stream messages: a message carrying several items costs a fraction of
one message per item in Python gRPC, so a relay sends what queued up together as one message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar

from agentmesh.common.v1 import run_pb2

T = TypeVar("T")

_END = object()
# Items `batched` reads ahead of its consumer: the stream's backpressure still reaches the source.
_READ_AHEAD = 64


async def next_batch(queue: asyncio.Queue[Any], end: object) -> tuple[list[Any], bool]:
    """Every item queued now, waiting only for the first: `(items, ended)`, where `ended` says
    the `end` marker was taken (the items before it are returned with it)."""
    batch: list[Any] = []
    item = await queue.get()
    while item is not end:
        batch.append(item)
        if queue.empty():
            return batch, False
        item = queue.get_nowait()
    return batch, True


def merge_text_deltas(events: list[run_pb2.RunEvent]) -> list[run_pb2.RunEvent]:
    """`events` with each run of consecutive `text_delta`s of the same run, session, agent and
    delegation path merged into one delta carrying their concatenated text. Every character
    stays, in order; nothing else is touched, and an event that carries a
    `seq` (a recorded step) is never merged into another. So how many deltas a client sees
    depends on how busy its reader was: what it may count on is their concatenation."""
    merged: list[run_pb2.RunEvent] = []
    copied = False  # whether merged[-1] is a copy of ours (the caller's events are not changed)
    for event in events:
        if merged and _same_text_stream(merged[-1], event):
            if not copied:
                merged[-1], copied = _copy(merged[-1]), True
            merged[-1].text_delta.text += event.text_delta.text
        else:
            merged.append(event)
            copied = False
    return merged


def _same_text_stream(a: run_pb2.RunEvent, b: run_pb2.RunEvent) -> bool:
    return (
        a.HasField("text_delta")
        and b.HasField("text_delta")
        and not a.seq
        and not b.seq
        and a.run_id == b.run_id
        and a.session_id == b.session_id
        and a.agent == b.agent
        and list(a.delegation_path) == list(b.delegation_path)
    )


def _copy(event: run_pb2.RunEvent) -> run_pb2.RunEvent:
    copy = run_pb2.RunEvent()
    copy.CopyFrom(event)
    return copy


async def batched(source: AsyncIterator[T]) -> AsyncIterator[list[T]]:
    """`source`'s items in order, in batches: the first item as soon as it arrives, then whatever
    arrived while the consumer was busy with the batch before (sending it). Nothing waits for a
    batch to fill, so no item is held back. `source`'s error is raised after the items before it;
    closing this iterator early stops reading and closes `source`."""
    queue: asyncio.Queue[Any] = asyncio.Queue(_READ_AHEAD)
    failure: list[Exception] = []

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put(item)
        except Exception as error:  # handed to the consumer, after the items before it
            failure.append(error)
        await queue.put(_END)

    reader = asyncio.create_task(pump())
    try:
        ended = False
        while not ended:
            batch, ended = await next_batch(queue, _END)
            if batch:
                yield batch
        if failure:
            raise failure[0]
    finally:
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


R = TypeVar("R")


def item_of(results: asyncio.Future[list[R]], index: int) -> asyncio.Future[R]:
    """The item at `index` of what `results` will hold, as a future of its own (one call's
    results, each awaited by another task): settled with it, failed or cancelled with it."""
    item: asyncio.Future[R] = asyncio.get_running_loop().create_future()

    def settle(done: asyncio.Future[list[R]]) -> None:
        if item.done():
            return
        if done.cancelled():
            item.cancel()
        elif (error := done.exception()) is not None:
            item.set_exception(error)
        else:
            item.set_result(done.result()[index])

    results.add_done_callback(settle)
    return item


class Coalescer(Generic[T, R]):
    """Sends concurrent callers' items in as few calls as possible (what accumulates
    while a write is in flight goes in the next one). A caller whose items find no call in flight
    sends them at once, so a lone caller waits for nothing; items submitted while a call is in
    flight go together in the next call, which the first of their callers sends once the call
    before has returned. `send` gets the items of several callers in submission order and returns
    one result per item, in the same order; each caller gets its own items' results, or the error
    of the call that carried them. A caller cancelled before its items were sent takes them back;
    when the caller sending a call is cancelled (the call with it), the other callers' items are
    sent again by one of them — `send` must make a repeat harmless (idempotency keys)."""

    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        self._send = send
        self._pending: list[tuple[list[T], asyncio.Future[list[R]]]] = []
        self._idle = asyncio.Event()
        self._idle.set()

    async def submit(self, items: list[T]) -> list[R]:
        future: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        entry = (list(items), future)
        self._pending.append(entry)
        try:
            while not future.done():
                if self._idle.is_set():
                    await self._send_pending()
                else:
                    await self._idle.wait()
        except asyncio.CancelledError:
            self._pending = [pending for pending in self._pending if pending is not entry]
            future.cancel()  # a result that comes anyway is nobody's
            raise
        return future.result()

    async def _send_pending(self) -> None:
        batch, self._pending = self._pending, []
        self._idle.clear()
        try:
            results = await self._send([item for items, _ in batch for item in items])
        except asyncio.CancelledError:
            # This caller was cancelled with the call: the others' items go again, first.
            self._pending[:0] = [entry for entry in batch if not entry[1].done()]
            raise
        except Exception as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
                    future.exception()  # retrieved here: its caller raises it, or is gone
            return
        finally:
            self._idle.set()
        start = 0
        for items, future in batch:
            if not future.done():
                future.set_result(results[start : start + len(items)])
            start += len(items)
