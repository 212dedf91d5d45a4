"""Fewer, fuller stream messages (issue 16): a message carrying several items costs a fraction of
one message per item in Python gRPC, so a relay sends what queued up together as one message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, TypeVar

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
