"""Asking a gRPC server's standard health service: what `agentmesh healthcheck` and the tests'
harness do. Its own module, importing only the grpc health stubs, because `runtime.server`'s
imports (interceptors, tracing, metrics) cost a second and containers run the health check every
few seconds, often several at once on a busy machine."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.runtime.tls import PLAINTEXT, TlsFiles


async def check_health(
    address: str, *, service: str = "", timeout: float = 2.0, tls: TlsFiles = PLAINTEXT
) -> str:
    """The health status name the server at `address` reports for `service` ("" = the server),
    or the gRPC status code's name when it does not answer. Over TLS when `tls` has a CA."""
    credentials = tls.channel_credentials()
    channel = (
        grpc.aio.insecure_channel(address)
        if credentials is None
        else grpc.aio.secure_channel(address, credentials)
    )
    async with channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            return error.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
