"""Per-user rate limiting: one token bucket per caller, in this gateway's memory.

Each gateway replica limits on its own; behind a balancer spreading a user over N replicas the
effective limit is up to N times higher, which is what an edge limit is for (stopping one client
from flooding a replica), not an account quota.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agentmesh.gateway.errors import RateLimited


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Token buckets per key: `burst` requests at once, refilled at `rate_per_second`.

    A rate of 0 disables limiting. The table is bounded: past `max_keys` buckets, those refilled
    to full (idle callers, indistinguishable from new ones) are dropped.
    """

    def __init__(
        self,
        *,
        rate_per_second: float,
        burst: int,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate_per_second
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def try_acquire(self, key: str) -> float:
        """Takes one token for `key`: 0 when granted, else the seconds until one is available."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._prune(now)
            bucket = self._buckets[key] = _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self._rate

    def wait_seconds(self, key: str) -> float:
        """The seconds until `key` could take a token (0 when it could now), taking none."""
        bucket = self._buckets.get(key)
        if not self.enabled or bucket is None:
            return 0.0
        tokens = min(self._burst, bucket.tokens + (self._clock() - bucket.updated) * self._rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self._rate

    def acquire(self, key: str) -> None:
        """Takes one token for `key`, or raises RateLimited with the time to wait."""
        wait = self.try_acquire(key)
        if wait > 0:
            raise RateLimited(wait)

    def _prune(self, now: float) -> None:
        full = [
            key
            for key, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.updated) * self._rate >= self._burst
        ]
        for key in full:
            del self._buckets[key]
