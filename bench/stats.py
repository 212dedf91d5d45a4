"""Measuring primitives: latency samples at one call in flight, throughput at N in flight, and
A/B rounds that interleave a baseline with what is compared against it.

On a shared, noisy machine a figure measured a minute after its baseline compares two different
machines. So ratios are built from rounds: each round measures every contender once, in an order
that alternates between rounds (A B, B A, ...), and the samples of all rounds are pooled.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Call = Callable[[], Awaitable[Any]]


def percentile(samples: list[float], q: float) -> float:
    """The nearest-rank percentile `q` (0-100) of `samples`."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Latency:
    """Seconds per call, one call in flight."""

    samples: list[float] = field(default_factory=list)
    errors: int = 0

    @property
    def p50_ms(self) -> float:
        return percentile(self.samples, 50) * 1000

    @property
    def p99_ms(self) -> float:
        return percentile(self.samples, 99) * 1000

    def summary(self) -> dict[str, float | int]:
        return {
            "p50_ms": round(self.p50_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "count": len(self.samples),
            "errors": self.errors,
        }


@dataclass
class Throughput:
    """Completed calls per second of wall time, N in flight."""

    completed: int = 0
    errors: int = 0
    seconds: float = 0.0
    first_error: str = ""

    @property
    def per_second(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0

    def add(self, other: Throughput) -> None:
        self.completed += other.completed
        self.errors += other.errors
        self.seconds += other.seconds
        self.first_error = self.first_error or other.first_error

    def summary(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {
            "per_second": round(self.per_second, 1),
            "completed": self.completed,
            "errors": self.errors,
            "seconds": round(self.seconds, 2),
        }
        if self.first_error:
            out["first_error"] = self.first_error[:300]
        return out


async def latency(call: Call, count: int, *, into: Latency | None = None) -> Latency:
    """Times `count` calls made one after another. A failed call is counted, not timed."""
    result = into if into is not None else Latency()
    for _ in range(count):
        start = time.perf_counter()
        try:
            await call()
        except Exception:
            result.errors += 1
            if result.errors > max(3, count // 10):
                raise
            continue
        result.samples.append(time.perf_counter() - start)
    return result


# What a worker of a throughput test calls: given the worker's number, its call (a worker may
# need a connection or a session of its own).
WorkerCall = Callable[[int], Call]


def same_call(call: Call) -> WorkerCall:
    """Every worker makes the same call."""
    return lambda _worker: call


async def throughput(make_call: WorkerCall, *, in_flight: int, seconds: float, max_calls: int) -> Throughput:
    """Keeps `in_flight` workers calling for `seconds` (or until `max_calls` were started)."""
    result = Throughput()
    deadline = time.perf_counter() + seconds
    started = 0

    async def worker(number: int) -> None:
        nonlocal started
        call = make_call(number)
        while time.perf_counter() < deadline and started < max_calls:
            started += 1
            try:
                await call()
                result.completed += 1
            except Exception as error:  # counted: a load test must not stop at the first failure
                result.errors += 1
                result.first_error = result.first_error or repr(error)

    begin = time.perf_counter()
    await asyncio.gather(*(worker(number) for number in range(in_flight)))
    result.seconds = time.perf_counter() - begin
    return result


async def warm_up(call: Call, count: int) -> None:
    for _ in range(count):
        await call()


async def latency_rounds(
    contenders: Mapping[str, Call], *, rounds: int, per_round: int
) -> dict[str, Latency]:
    """Latency of every contender, `per_round` calls each per round, in alternating order."""
    results = {name: Latency() for name in contenders}
    names = list(contenders)
    for number in range(rounds):
        for name in names if number % 2 == 0 else reversed(names):
            await latency(contenders[name], per_round, into=results[name])
    return results


async def throughput_rounds(
    contenders: Mapping[str, WorkerCall], *, rounds: int, in_flight: int, seconds: float, max_calls: int
) -> dict[str, Throughput]:
    """Throughput of every contender, one timed burst each per round, in alternating order."""
    results = {name: Throughput() for name in contenders}
    names = list(contenders)
    for number in range(rounds):
        for name in names if number % 2 == 0 else reversed(names):
            burst = await throughput(
                contenders[name], in_flight=in_flight, seconds=seconds, max_calls=max_calls
            )
            results[name].add(burst)
    return results
