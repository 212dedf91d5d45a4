"""Serves the registry's and the memory service's gRPC APIs on the gateway by forwarding each call.

One generic handler per method, built from the service's descriptor: the request is decoded (so
the policy can look into it), forwarded to the real service as the caller — its token, trace
context and remaining deadline travel on through the shared client interceptor — and the answer
or the error comes back unchanged: code, reason, field violations and metadata are kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from agentmesh.gateway.access import current_caller
from agentmesh.runtime.client import stream, unary

Override = Callable[[Any], Awaitable[Any]]


def forwarding_handler(
    service: ServiceDescriptor, channel: grpc.aio.Channel, *, overrides: Mapping[str, Override] | None = None
) -> grpc.GenericRpcHandler:
    """A generic handler serving every method of `service` by forwarding it over `channel`.
    `overrides` names unary methods the gateway's core serves itself (request in, response out),
    because they do more than the service behind them (terminating an agent stops its runs)."""
    overrides = overrides or {}
    handlers = {
        method.name: _method_handler(service, method, channel, overrides.get(method.name))
        for method in service.methods
    }
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


def _method_handler(
    service: ServiceDescriptor, method: MethodDescriptor, channel: grpc.aio.Channel, override: Override | None
) -> grpc.RpcMethodHandler:
    request_type = message_factory.GetMessageClass(method.input_type)
    response_type = message_factory.GetMessageClass(method.output_type)
    path = f"/{service.full_name}/{method.name}"
    if method.client_streaming:
        raise ValueError(f"{path}: client-streaming methods cannot be forwarded")
    if override is not None and method.server_streaming:
        raise ValueError(f"{path}: only unary methods can be overridden")
    if method.server_streaming:
        streaming = channel.unary_stream(
            path,
            request_serializer=request_type.SerializeToString,
            response_deserializer=response_type.FromString,
        )

        async def forward_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for response in stream(streaming, request, metadata=current_caller().metadata):
                yield response

        return grpc.unary_stream_rpc_method_handler(
            forward_stream,
            request_deserializer=request_type.FromString,
            response_serializer=response_type.SerializeToString,
        )
    single = channel.unary_unary(
        path,
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )

    async def forward(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if override is not None:
            return await override(request)
        return await unary(single, request, metadata=current_caller().metadata)

    return grpc.unary_unary_rpc_method_handler(
        forward,
        request_deserializer=request_type.FromString,
        response_serializer=response_type.SerializeToString,
    )
