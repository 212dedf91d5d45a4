"""Calling an internal service directly, as the mesh's own services do: with a system token
signed with the mesh's secret and a service credential, sent on every call of a channel."""

from __future__ import annotations

from typing import Any

import grpc

from agentmesh.runtime.identity import AUTHORIZATION, TokenCodec
from agentmesh.runtime.interceptors import client_interceptors
from agentmesh.runtime.service_identity import ServiceCredentials, credential_interceptors, with_metadata
from tests.mesh import JWT_SECRET, bearer


def system_token(secret: str = JWT_SECRET) -> str:
    return TokenCodec(secret).system_token()


def system_metadata(secret: str = JWT_SECRET) -> tuple[tuple[str, str], ...]:
    return bearer(system_token(secret))


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    return with_metadata(details, AUTHORIZATION, f"Bearer {token}", replace=False)


class _UnaryBearer(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


class _StreamBearer(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


def service_credentials(secret: str = JWT_SECRET, *, service: str = "tests") -> ServiceCredentials:
    return ServiceCredentials(secret, service=service)


def authorized_channel(address: str, token: str | None = None) -> grpc.aio.Channel:
    """A channel whose every call carries `token` (a system token by default) unless the call
    names its own `authorization`, and a service credential, as a mesh service's calls do, plus
    the shared client interceptors."""
    token = token or system_token()
    return grpc.aio.insecure_channel(
        address,
        interceptors=[
            _UnaryBearer(token),
            _StreamBearer(token),
            *credential_interceptors(service_credentials()),
            *client_interceptors(),
        ],
    )


def service_channel(address: str, secret: str = JWT_SECRET) -> grpc.aio.Channel:
    """A channel to an internal service whose calls carry a service credential of the mesh whose
    secret is `secret` (as a mesh service's do) and whatever `authorization` each call names, plus
    the shared client interceptors."""
    return grpc.aio.insecure_channel(
        address, interceptors=[*credential_interceptors(service_credentials(secret)), *client_interceptors()]
    )
