"""Who may call which registry RPC: one policy table, applied by one server interceptor.

The table decides what needs no data: whether a call needs a signed-in caller, a superuser or the
system principal. What depends on data (a project and everything in it belong to its owner and
superusers) is the rules' business, in `registry.py`. Every RPC of the service must have an entry:
the interceptor refuses to start otherwise, so a new RPC cannot go out unguarded.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import grpc

from agentmesh.registry.errors import SuperuserRequired, SystemRequired
from agentmesh.registry.v1 import registry_service_pb2
from agentmesh.runtime.identity import Principal, TokenCodec, authenticate, current_principal

SERVICE = registry_service_pb2.DESCRIPTOR.services_by_name["RegistryService"]


class Access(enum.Enum):
    PUBLIC = "public"  # no token needed
    SIGNED_IN = "signed_in"  # any valid access token; the rules check ownership
    SUPERUSER = "superuser"  # superusers (and the system principal, which is one)
    SYSTEM = "system"  # the system principal only: services acting on their own behalf


POLICY: Mapping[str, Access] = {
    "RegisterUser": Access.PUBLIC,
    "Login": Access.PUBLIC,
    "RefreshTokens": Access.PUBLIC,
    # Possession of the refresh token is the credential, as for RefreshTokens.
    "RevokeRefreshToken": Access.PUBLIC,
    "GetCurrentUser": Access.SIGNED_IN,
    "CreateUser": Access.SUPERUSER,
    "CreateAgentType": Access.SUPERUSER,
    "GetAgentType": Access.SIGNED_IN,
    "ListAgentTypes": Access.SIGNED_IN,
    "UpdateAgentType": Access.SUPERUSER,
    "DeleteAgentType": Access.SUPERUSER,
    "CreateProject": Access.SIGNED_IN,
    "GetProject": Access.SIGNED_IN,
    "ListProjects": Access.SIGNED_IN,
    "UpdateProject": Access.SIGNED_IN,
    "DeleteProject": Access.SIGNED_IN,
    "CreateAgent": Access.SIGNED_IN,
    "GetAgent": Access.SIGNED_IN,
    "ListAgents": Access.SIGNED_IN,
    "UpdateAgent": Access.SIGNED_IN,
    "PauseAgent": Access.SIGNED_IN,
    "ResumeAgent": Access.SIGNED_IN,
    "DeleteAgent": Access.SIGNED_IN,
    "GetAgentMetrics": Access.SIGNED_IN,
    # Executors call these with the end user's token forwarded, so ownership applies.
    "ResolveAgent": Access.SIGNED_IN,
    "StartAgentRun": Access.SIGNED_IN,
    "FinishAgentRun": Access.SIGNED_IN,
    "FinishAgentRuns": Access.SIGNED_IN,
    "RegisterExecutor": Access.SYSTEM,
    "ListExecutors": Access.SUPERUSER,
}


def authorize(access: Access, principal: Principal | None) -> None:
    """Raises PERMISSION_DENIED when the principal lacks the access level."""
    if access is Access.SUPERUSER and not (principal and principal.is_superuser):
        raise SuperuserRequired("only superusers may do this")
    if access is Access.SYSTEM and not (principal and principal.is_system):
        raise SystemRequired("only agentmesh services may do this")


class AuthorizationInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates the bearer token of every non-public registry call, applies the policy
    table, and makes the caller available to the servicer as `current_principal`."""

    def __init__(self, tokens: TokenCodec, policy: Mapping[str, Access] = POLICY) -> None:
        methods = {method.name for method in SERVICE.methods}
        if set(policy) != methods:
            raise ValueError(
                f"registry policy table out of date: missing {sorted(methods - set(policy))}, "
                f"unknown {sorted(set(policy) - methods)}"
            )
        self._tokens = tokens
        self._policy = dict(policy)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        service, _, method = handler_call_details.method.lstrip("/").partition("/")
        if handler is None or service != SERVICE.full_name:
            return handler  # health, reflection
        if not handler.unary_unary:
            raise ValueError(f"registry RPC {method} is not unary")
        access = self._policy[method]
        metadata = handler_call_details.invocation_metadata
        inner = handler.unary_unary

        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            principal = None if access is Access.PUBLIC else authenticate(self._tokens, metadata)
            authorize(access, principal)
            token = current_principal.set(principal)
            try:
                return await inner(request, context)
            finally:
                current_principal.reset(token)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
