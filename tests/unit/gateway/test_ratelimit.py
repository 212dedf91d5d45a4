"""The per-user token bucket, on a fake clock."""

from __future__ import annotations

import pytest

from agentmesh.gateway.errors import RateLimited
from agentmesh.gateway.ratelimit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_refill_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=2, burst=3, clock=clock)
    assert [limiter.try_acquire("ada") for _ in range(3)] == [0, 0, 0]
    assert limiter.try_acquire("ada") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.try_acquire("ada") == 0
    assert limiter.try_acquire("ada") > 0


def test_buckets_are_per_user() -> None:
    limiter = RateLimiter(rate_per_second=1, burst=1, clock=Clock())
    limiter.acquire("ada")
    limiter.acquire("bob")
    with pytest.raises(RateLimited) as raised:
        limiter.acquire("ada")
    assert raised.value.retry_after_seconds == 1
    assert raised.value.metadata == {"retry_after_seconds": "1"}
    assert raised.value.reason == "RATE_LIMITED"


def test_zero_rate_disables_the_limit() -> None:
    limiter = RateLimiter(rate_per_second=0, burst=1, clock=Clock())
    for _ in range(100):
        limiter.acquire("ada")


def test_idle_buckets_are_dropped_past_the_key_bound() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=1, burst=1, max_keys=2, clock=clock)
    limiter.acquire("ada")
    limiter.acquire("bob")
    clock.now += 10  # both refilled: indistinguishable from new callers
    limiter.acquire("cid")
    assert set(limiter._buckets) == {"cid"}
