"""Which service is calling: the service credential every internal RPC needs.

A user's access token says *for whom* a call is made; it does not say that the caller is one of the
mesh's services — anyone who reaches an internal port with a token could otherwise call what only
services should. So every call to an internal service also carries a service
credential in `x-agentmesh-service` metadata: a short-lived JWT (`typ: service`, `sub`: the calling
service), HMAC-signed with a key derived from the mesh's JWT secret for this purpose alone. A user
token is signed with the secret itself, so it never passes as a service credential, and a service
credential never passes as a user token (docs/security.md says why this and not a second secret).

`ServiceCredentials` mints and verifies them; the client interceptors put one on every call of a
channel (`runtime.channels`); `ServiceIdentityInterceptor` refuses a call to a guarded service
without a valid one (UNAUTHENTICATED) before anything else runs. Health and reflection stay open.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

import grpc
import jwt
from google.protobuf.descriptor import ServiceDescriptor

from agentmesh.runtime.errors import SERVICE_CREDENTIAL_INVALID, SERVICE_CREDENTIAL_MISSING, Unauthenticated
from agentmesh.runtime.identity import ALGORITHM, Admit, PolicyInterceptor, VerifiedTokens

SERVICE_CREDENTIAL = "x-agentmesh-service"
# What the derived key is for: changing it invalidates every credential of an older scheme.
_KEY_PURPOSE = b"agentmesh service credential v1"
_TOKEN_TYPE = "service"
_ISSUER = "agentmesh"

# The service that made the current call (for logs and checks in handlers), or None.
current_service: ContextVar[str | None] = ContextVar("agentmesh_calling_service", default=None)


class ServiceCredentials:
    """Mints this service's credential and verifies other services' ones, with a key derived from
    the mesh's JWT secret (HMAC-SHA256 of a fixed purpose string), so the two kinds of token can
    never stand in for each other. A minted credential is reused until `renew_seconds` before it
    expires: signing one per call would cost CPU on every hop."""

    def __init__(
        self,
        secret: str,
        *,
        service: str,
        ttl_seconds: float = 300.0,
        renew_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if len(secret) < 32:
            raise ValueError("the JWT secret must be at least 32 characters")
        self._key = hmac.new(secret.encode(), _KEY_PURPOSE, hashlib.sha256).digest()
        self.service = service
        self._ttl = ttl_seconds
        self._renew = min(renew_seconds, ttl_seconds / 2)
        self._clock = clock
        self._lock = threading.Lock()
        self._current: tuple[str, float] | None = None  # (credential, renew at)
        self._verified: VerifiedTokens[str] = VerifiedTokens()  # on jwt's clock, as `exp` is

    def credential(self) -> str:
        """This service's credential, minted anew shortly before the last one expires."""
        now = self._clock()
        with self._lock:
            if self._current is None or now >= self._current[1]:
                self._current = (self._mint(now), now + self._ttl - self._renew)
            return self._current[0]

    def _mint(self, now: float) -> str:
        claims = {
            "sub": self.service,
            "iss": _ISSUER,
            "iat": int(now),
            "exp": int(now + self._ttl),
            "jti": uuid.uuid4().hex,
            "typ": _TOKEN_TYPE,
        }
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, credential: str | None) -> str:
        """The calling service's name; UNAUTHENTICATED when the credential is missing, forged,
        expired or of another kind."""
        if not credential:
            raise Unauthenticated(
                "this is an internal agentmesh service: calls need a service credential",
                reason=SERVICE_CREDENTIAL_MISSING,
            )
        service = self._verified.get(credential)
        if service is not None:
            return service
        try:
            claims = jwt.decode(
                credential,
                self._key,
                algorithms=[ALGORITHM],
                issuer=_ISSUER,
                options={"require": ["sub", "exp", "iat", "typ"]},
            )
        except jwt.PyJWTError as error:
            raise Unauthenticated("invalid service credential", reason=SERVICE_CREDENTIAL_INVALID) from error
        if claims.get("typ") != _TOKEN_TYPE:
            raise Unauthenticated("not a service credential", reason=SERVICE_CREDENTIAL_INVALID)
        return self._verified.put(credential, str(claims["sub"]), float(claims["exp"]))


def service_credential(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key == SERVICE_CREDENTIAL:
            return value.decode() if isinstance(value, bytes) else value
    return None


class ServiceIdentityInterceptor(PolicyInterceptor):
    """Refuses every call to the guarded services that carries no valid service credential
    (UNAUTHENTICATED); other services on the same server (health, reflection, a public service)
    pass untouched. Put it before the `AuthenticationInterceptor`, which then decides on whose
    behalf the admitted service calls."""

    def __init__(self, credentials: ServiceCredentials, services: Iterable[ServiceDescriptor]) -> None:
        super().__init__()
        self._credentials = credentials
        self._prefixes = tuple(f"/{service.full_name}/" for service in services)

    def admission(self, method: str, handler: grpc.RpcMethodHandler) -> Admit | None:
        if not method.startswith(self._prefixes):
            return None

        def admit(request: Any, context: grpc.aio.ServicerContext) -> None:
            credential = service_credential(context.invocation_metadata())
            current_service.set(self._credentials.verify(credential))

        return admit


def with_metadata(
    details: grpc.aio.ClientCallDetails, key: str, value: str, *, replace: bool
) -> grpc.aio.ClientCallDetails:
    """The call's details with `key: value` in its metadata: instead of any entry of that key when
    `replace`, else only when the call names none."""
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    if replace or key not in metadata:
        metadata = grpc.aio.Metadata(*((k, v) for k, v in metadata if k != key))
        metadata.add(key, value)
    return grpc.aio.ClientCallDetails(
        method=details.method,
        timeout=details.timeout,
        metadata=metadata,
        credentials=details.credentials,
        wait_for_ready=details.wait_for_ready,
    )


def _with_credential(details: grpc.aio.ClientCallDetails, credential: str) -> grpc.aio.ClientCallDetails:
    # Whatever credential the call had (say, one a client sent the gateway, which forwards its
    # metadata) is replaced: a call leaves with this service's own credential only.
    return with_metadata(details, SERVICE_CREDENTIAL, credential, replace=True)


class _UnaryCredential(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, credentials: ServiceCredentials) -> None:
        self._credentials = credentials

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(
            _with_credential(client_call_details, self._credentials.credential()), request
        )


class _StreamCredential(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, credentials: ServiceCredentials) -> None:
        self._credentials = credentials

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(
            _with_credential(client_call_details, self._credentials.credential()), request
        )


def credential_interceptors(credentials: ServiceCredentials) -> list[grpc.aio.ClientInterceptor]:
    """Client interceptors that send this service's credential on every call of a channel."""
    return [_UnaryCredential(credentials), _StreamCredential(credentials)]
