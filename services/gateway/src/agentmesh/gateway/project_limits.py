"""The project limits a gateway enforces itself, because only the edge sees what they count: a
project's requests a minute and its streams open at once (docs/tenants.md), plus the operator's
cap on one user's open streams.

Counts live in this gateway's memory, per replica (decision record 0029): N replicas behind a
balancer let a project reach up to N times its limit. The limits themselves are the registry's:
each project's `limits_in_force` (its own, else the operator's defaults), read with the mesh's
system token and reused for a few seconds, so a changed limit holds on every replica within that
time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from agentmesh.gateway.policy import ProjectTarget
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import registry_service_pb2, resources_pb2
from agentmesh.runtime.client import unary
from agentmesh.runtime.errors import QuotaExceeded

Metadata = tuple[tuple[str, str], ...]

# What a stream refused for a full count is told to wait: streams end at any moment.
STREAM_RETRY_SECONDS = 1


@dataclass(frozen=True)
class LimitsInForce:
    """The limits of one project this gateway counts (0: unlimited)."""

    project_id: str
    requests_per_minute: int = 0
    open_streams: int = 0

    @classmethod
    def of(cls, project: resources_pb2.Project) -> LimitsInForce:
        limits = project.limits_in_force
        return cls(project.id, limits.requests_per_minute, limits.open_streams)


# The project the request being served was admitted to, with its limits; None when its caller
# is held to no project's limits (a superuser acts on any project; operations of no project).
admitted_project: ContextVar[LimitsInForce | None] = ContextVar("agentmesh_admitted_project", default=None)


class ProjectLimitsCache:
    """Each project's limits as the registry last said, by id and by slug, reused for
    `ttl_seconds`. Lookups of one project that miss together ask the registry once."""

    def __init__(
        self,
        *,
        registry: RegistryClient,
        system_metadata: Callable[[], Metadata | None],
        ttl_seconds: float,
        capacity: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._system_metadata = system_metadata
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._clock = clock
        self._entries: dict[tuple[str, str], tuple[LimitsInForce, float]] = {}
        self._fetching: dict[tuple[str, str], asyncio.Future[LimitsInForce]] = {}

    def remember(self, project: resources_pb2.Project) -> LimitsInForce:
        """Keeps what a read of the project said (the access check reads it anyway)."""
        limits = LimitsInForce.of(project)
        expiry = self._clock() + self._ttl
        if len(self._entries) >= self._capacity:
            self._entries.clear()  # a flood of projects: start afresh rather than grow
        self._entries[("id", project.id)] = self._entries[("slug", project.slug)] = (limits, expiry)
        return limits

    async def of(self, target: ProjectTarget) -> LimitsInForce:
        key = ("id", target.id) if target.id else ("slug", target.slug)
        entry = self._entries.get(key)
        if entry is not None and entry[1] > self._clock():
            return entry[0]
        fetching = self._fetching.get(key)
        if fetching is None:
            fetching = self._fetching[key] = asyncio.ensure_future(self._fetch(target))
            fetching.add_done_callback(lambda _: self._fetching.pop(key, None))
        return await asyncio.shield(fetching)

    async def _fetch(self, target: ProjectTarget) -> LimitsInForce:
        request = registry_service_pb2.GetProjectRequest(id=target.id, slug=target.slug)
        found = await unary(self._registry.stub.GetProject, request, metadata=self._system_metadata())
        return self.remember(found.project)


class RequestRates:
    """A project's requests a minute: a token bucket per project holding a minute's requests,
    refilled at its limit a minute, so a burst of the whole minute's share is let through and
    then one request per 60/limit seconds. A project whose limit changes starts a full bucket."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._by_limit: dict[int, RateLimiter] = {}

    def admit(self, project: LimitsInForce) -> None:
        """Counts one request of the project, or raises QuotaExceeded saying when one fits."""
        allowed = project.requests_per_minute
        if not allowed:
            return
        limiter = self._by_limit.get(allowed)
        if limiter is None:
            limiter = self._by_limit[allowed] = RateLimiter(
                rate_per_second=allowed / 60, burst=allowed, clock=self._clock
            )
        wait = limiter.try_acquire(project.project_id)
        if wait > 0:
            raise QuotaExceeded(
                f"project limit requests_per_minute reached: {allowed} requests a minute; "
                f"retry in {wait:.1f} s",
                subject=f"project:{project.project_id}",
                limit="requests_per_minute",
                retry_after_seconds=wait,
            )


class OpenStreams:
    """Streams open at once through this gateway: per project (its `open_streams` limit) and per
    user (the operator's `max_open_streams_per_user`, 0: no cap). A stream holds its slot from
    its open (`holding`) to its end, however it ends."""

    def __init__(self, *, max_per_user: int = 0) -> None:
        self._max_per_user = max_per_user
        self._by_project: dict[str, int] = {}
        self._by_user: dict[str, int] = {}

    def open_count(self, project_id: str) -> int:
        return self._by_project.get(project_id, 0)

    @contextmanager
    def holding(self, user_id: str) -> Iterator[None]:
        """Holds a stream slot of the user and of the admitted project (`admitted_project`) for
        the block, or raises QuotaExceeded at once when one of them is full."""
        project = admitted_project.get()
        counted: list[tuple[dict[str, int], str]] = []
        if project is not None and project.open_streams:
            self._check(self._by_project, project.project_id, project.open_streams, "project", "open_streams")
            counted.append((self._by_project, project.project_id))
        if user_id and self._max_per_user:
            self._check(self._by_user, user_id, self._max_per_user, "user", "max_open_streams_per_user")
            counted.append((self._by_user, user_id))
        for counts, key in counted:
            counts[key] = counts.get(key, 0) + 1
        try:
            yield
        finally:
            for counts, key in counted:
                if counts[key] <= 1:
                    del counts[key]
                else:
                    counts[key] -= 1

    @staticmethod
    def _check(counts: dict[str, int], key: str, allowed: int, kind: str, name: str) -> None:
        if counts.get(key, 0) >= allowed:
            raise QuotaExceeded(
                f"{kind} limit {name} reached: {allowed} streams open at once; retry when one ends",
                subject=f"{kind}:{key}",
                limit=name,
                retry_after_seconds=STREAM_RETRY_SECONDS,
            )
