"""ExecutorService over gRPC: proto in, proto out; the rules live in runner.py and cache.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc

from agentmesh.executor.agents.cache import AgentCache
from agentmesh.executor.agents.runtime import AgentRuntime
from agentmesh.executor.run.runner import RunExecutor
from agentmesh.internal.executor.v1 import executor_service_pb2 as pb
from agentmesh.internal.executor.v1 import executor_service_pb2_grpc as pb_grpc
from agentmesh.runtime.errors import FieldViolation, ValidationFailed


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):
    """Runs the calls the server's interceptors admitted (a service credential and a caller's
    token, as on every internal service)."""

    def __init__(self, runner: RunExecutor, cache: AgentCache[AgentRuntime]) -> None:
        self._runner = runner
        self._cache = cache

    async def Run(
        self, request: pb.RunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.RunResponse]:
        async with contextlib.aclosing(self._runner.run_batches(request)) as batches:
            async for batch in batches:
                if request.batch_events:  # the caller reads several events per message
                    yield pb.RunResponse(events=batch)
                else:
                    for event in batch:
                        yield pb.RunResponse(event=event)

    async def GetStats(
        self, request: pb.GetStatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatsResponse:
        stats = self._cache.stats()
        return pb.GetStatsResponse(
            cache_size=stats.size,
            cache_hits=stats.hits,
            cache_misses=stats.misses,
            cache_evictions=stats.evictions,
            active_runs=self._runner.active_runs,
        )

    async def EndSession(
        self, request: pb.EndSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.EndSessionResponse:
        if not request.session_id:
            raise ValidationFailed.field("session_id", "is required")
        return pb.EndSessionResponse(released_agents=self._cache.end_session(request.session_id))

    async def CancelRuns(
        self, request: pb.CancelRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelRunsResponse:
        violations = [
            FieldViolation(name, "is required")
            for name, value in (("project_id", request.project_id), ("agent_id", request.agent_id))
            if not value
        ]
        if violations:
            raise ValidationFailed.of(violations)
        cancelled = await self._runner.cancel_runs(
            request.project_id, request.agent_id, request.reason, request.run_id
        )
        return pb.CancelRunsResponse(cancelled_runs=cancelled)
