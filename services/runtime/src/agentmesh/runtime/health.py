"""Asking a gRPC server's standard health service: what `agentmesh healthcheck` and the tests'
harness do. Its own module, importing only the grpc health stubs, because `runtime.server`'s
imports (interceptors, tracing, metrics) cost a second and containers run the health check every
few seconds, often several at once on a busy machine."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


async def check_health(address: str, *, service: str = "", timeout: float = 2.0) -> str:
    """The health status name the server at `address` reports for `service` ("" = the server),
    or the gRPC status code's name when it does not answer."""
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
