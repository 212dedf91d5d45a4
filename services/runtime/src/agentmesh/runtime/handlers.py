"""The base of agentmesh's server interceptors: each method's handler wrapped once, not per call.

Its own module, below both the telemetry interceptor (`interceptors`) and the policy ones
(`identity`), so that neither needs the other to share it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc


class HandlerWrappingInterceptor(grpc.aio.ServerInterceptor):
    """A server interceptor that wraps each method's handler once and reuses the wrapper while the
    server hands it the same handler: nothing is built per call. Subclasses say how to wrap."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        raise NotImplementedError
