"""ExecutorService over gRPC: proto in, proto out; the rules live in runner.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from agentmesh.executor.runner import RunExecutor
from agentmesh.executor.v1 import executor_service_pb2 as pb
from agentmesh.executor.v1 import executor_service_pb2_grpc as pb_grpc


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):
    def __init__(self, runner: RunExecutor) -> None:
        self._runner = runner

    async def Run(
        self, request: pb.RunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.RunResponse]:
        async for event in self._runner.run(request):
            yield pb.RunResponse(event=event)

    async def GetStats(
        self, request: pb.GetStatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatsResponse:
        return pb.GetStatsResponse(active_runs=self._runner.active_runs)
