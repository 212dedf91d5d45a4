"""Who is calling: access tokens (JWT, HS256) and the principal they carry across hops.

The registry issues tokens; every service verifies them with the same secret, the same way
(`AuthenticationInterceptor`). A request keeps the caller's own token on every internal hop
(`authorization` metadata), so each service can tell who it works for; services calling on their
own behalf use a short-lived system token. `Access` names who may call an operation, in every
service's policy table.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
import jwt
from google.protobuf.descriptor import ServiceDescriptor

from agentmesh.runtime.errors import (
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    TOKEN_MISSING,
    DomainError,
    PermissionDenied,
    SuperuserRequired,
    SystemRequired,
    Unauthenticated,
)
from agentmesh.runtime.handlers import HandlerWrappingInterceptor

ALGORITHM = "HS256"
AUTHORIZATION = "authorization"
SYSTEM_SUBJECT = "system"
# Verified tokens remembered per verifier (a caller sends the same token on every call and hop).
VERIFIED_CACHE_SIZE = 1024
V = TypeVar("V")


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of a request."""

    user_id: str
    is_superuser: bool = False
    email: str = ""
    # The user's token version when the token was issued (claim `ver`): the registry moves it on
    # at logout, deactivation and role changes, and gateways refuse tokens of an older one.
    token_version: int = 0
    # Set when the caller is a program signed in with an API key (claims `key` and `prj`): the
    # key's id, and the one project it may act in when it is scoped to one.
    api_key_id: str = ""
    project_scope: str = ""

    @property
    def is_system(self) -> bool:
        return self.user_id == SYSTEM_SUBJECT


SYSTEM = Principal(user_id=SYSTEM_SUBJECT, is_superuser=True)

current_principal: ContextVar[Principal | None] = ContextVar("agentmesh_principal", default=None)
current_token: ContextVar[str | None] = ContextVar("agentmesh_token", default=None)
# Work done on no caller's behalf that may outlive any one token (a run taken over): where its
# calls get the service's own token, renewed as it expires, at each call (`outgoing_token`).
token_source: ContextVar[Callable[[], str | None] | None] = ContextVar("agentmesh_token_source", default=None)


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """Call metadata carrying `token` (None without one)."""
    return ((AUTHORIZATION, f"Bearer {token}"),) if token else None


def outgoing_token() -> str | None:
    """The token an outgoing call carries: the token source's current one, else the caller's."""
    source = token_source.get()
    return source() if source is not None else current_token.get()


def caller() -> Principal:
    """The authenticated caller of this RPC (set by the authentication interceptor). A handler
    that needs one calls this rather than reading `current_principal`, so an RPC a policy table
    wrongly marked public is refused (UNAUTHENTICATED) instead of running with no caller."""
    principal = current_principal.get()
    if principal is None:
        raise Unauthenticated("missing bearer token", reason=TOKEN_MISSING)
    return principal


class VerifiedTokens(Generic[V]):
    """Tokens that verified, with what they stood for, until they expire: a caller sends the same
    token on every call and hop, and checking its signature each time cost CPU on every call.
    Keyed by the exact string, so any change to a token (its signature included) misses and is
    verified anew. Bounded (least recently used out first); safe across threads."""

    def __init__(self, size: int = VERIFIED_CACHE_SIZE, *, clock: Callable[[], float] = time.time) -> None:
        self._size = size
        self._clock = clock
        self._verified: OrderedDict[str, tuple[V, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str) -> V | None:
        """What `token` verified as, while it has not expired; None otherwise."""
        with self._lock:
            hit = self._verified.get(token)
            if hit is None:
                return None
            if self._clock() >= hit[1]:
                del self._verified[token]
                return None
            self._verified.move_to_end(token)
            return hit[0]

    def put(self, token: str, value: V, expires_at: float) -> V:
        with self._lock:
            self._verified[token] = (value, expires_at)
            if len(self._verified) > self._size:
                self._verified.popitem(last=False)
        return value


class TokenCodec:
    """Issues and verifies access tokens with one secret. Rejects `alg=none`, bad signatures,
    expired tokens and tokens of another type."""

    def __init__(self, secret: str, *, access_ttl_seconds: int = 900, issuer: str = "agentmesh") -> None:
        if len(secret) < 32:
            raise ValueError("the JWT secret must be at least 32 characters")
        self._secret = secret
        self.access_ttl_seconds = access_ttl_seconds
        self._issuer = issuer
        self._verified: VerifiedTokens[Principal] = VerifiedTokens()

    def issue(self, principal: Principal, *, ttl_seconds: int | None = None) -> str:
        now = int(time.time())
        claims = {
            "sub": principal.user_id,
            "su": principal.is_superuser,
            "email": principal.email,
            "ver": principal.token_version,
            "iss": self._issuer,
            "iat": now,
            "exp": now + (ttl_seconds or self.access_ttl_seconds),
            "jti": uuid.uuid4().hex,
            "typ": "access",
        }
        if principal.api_key_id:
            claims["key"] = principal.api_key_id
        if principal.project_scope:
            claims["prj"] = principal.project_scope
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def system_token(self) -> str:
        return self.issue(SYSTEM, ttl_seconds=300)

    def verify(self, token: str) -> Principal:
        principal = self._verified.get(token)
        if principal is not None:
            return principal
        return self._verified.put(token, *self._decode(token))

    def _decode(self, token: str) -> tuple[Principal, float]:
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                issuer=self._issuer,
                options={"require": ["sub", "exp", "iat", "typ"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise Unauthenticated("access token expired", reason=TOKEN_EXPIRED) from error
        except jwt.PyJWTError as error:
            raise Unauthenticated("invalid access token", reason=TOKEN_INVALID) from error
        if claims.get("typ") != "access":
            raise Unauthenticated("not an access token", reason=TOKEN_INVALID)
        version = claims.get("ver", 0)
        principal = Principal(
            user_id=claims["sub"],
            is_superuser=bool(claims.get("su")),
            email=claims.get("email", ""),
            token_version=version if isinstance(version, int) else -1,
            api_key_id=str(claims.get("key", "")),
            project_scope=str(claims.get("prj", "")),
        )
        return principal, float(claims["exp"])


def bearer_token(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an `authorization: Bearer …` entry, or None."""
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


@contextlib.contextmanager
def calling_as(metadata: Sequence[tuple[str, str | bytes]] | None) -> Iterator[None]:
    """Within it, calls made by the clients go with the token of `metadata` (`current_token`):
    work done on no caller's behalf — a run taken over — as the service itself."""
    reset = current_token.set(bearer_token(metadata))
    try:
        yield
    finally:
        current_token.reset(reset)


def authenticate(codec: TokenCodec, metadata: Sequence[tuple[str, str | bytes]] | None) -> Principal:
    """The principal of a call's metadata; UNAUTHENTICATED when it has no valid token."""
    token = bearer_token(metadata)
    if token is None:
        raise Unauthenticated("missing bearer token", reason=TOKEN_MISSING)
    return codec.verify(token)


class Access(enum.StrEnum):
    """Who may call an operation: the levels every service's policy table uses."""

    PUBLIC = "public"  # anyone, no token
    AUTHENTICATED = "authenticated"  # any valid access token (a user's or the system's)
    SUPERUSER = "superuser"  # superusers (and the system principal, which is one)
    SYSTEM = "system"  # the system principal only: the mesh's services acting on their own behalf
    # The owner of the project the request concerns, or a superuser. Only the gateway's table
    # uses it; a service behind it checks ownership in its rules, where the data is.
    PROJECT_OWNER = "project_owner"


def authorize(access: Access, principal: Principal | None) -> None:
    """Raises PERMISSION_DENIED when the principal lacks a SUPERUSER or SYSTEM access level."""
    if access is Access.SUPERUSER and not (principal and principal.is_superuser):
        raise SuperuserRequired("only superusers may do this")
    if access is Access.SYSTEM and not (principal and principal.is_system):
        raise SystemRequired("only agentmesh services may do this")


Behavior = Callable[[Any, grpc.aio.ServicerContext], Any]
# What a policy interceptor runs before each call it guards, with the call's request (None for a
# call that streams requests) and context: raises the DomainError that refuses the call, else
# returns (or returns an awaitable, for a check that waits on something).
Admit = Callable[[Any, grpc.aio.ServicerContext], Awaitable[None] | None]


class PolicyInterceptor(HandlerWrappingInterceptor):
    """The one way an agentmesh server admits a call before its servicer runs: what the caller
    may do is checked here, never inline in a servicer. Subclasses say how a method's calls are
    admitted (`admission`, asked once per method: an `admit` reads what it needs of a call from
    the call's context); what `admit` raises fails the call through the shared server
    interceptor's status mapping. Used for service credentials (`ServiceIdentityInterceptor`),
    access tokens against a service's `Access` table (`AuthenticationInterceptor`, in the
    registry, memory and executor) and the gateway's richer policy table."""

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        admit = self.admission(method, handler)
        return handler if admit is None else admitted_handler(handler, admit)

    def admission(self, method: str, handler: grpc.RpcMethodHandler) -> Admit | None:
        """How to admit the calls of `method` (`/package.Service/Method`): None lets them
        through untouched."""
        raise NotImplementedError


class AuthenticationInterceptor(PolicyInterceptor):
    """Authenticates every call of one service: a valid bearer access token (a user's, or a
    service's system token), verified with the mesh's shared secret, else UNAUTHENTICATED.
    `policy` may name methods that need less (PUBLIC) or more (SUPERUSER, SYSTEM); without one
    every method is AUTHENTICATED. Health and reflection, and any other service on the same
    server, pass untouched. The caller is `current_principal` for the handler.

    With a policy, it must name every method of the service: a new RPC cannot go out unguarded.
    With a `revocation` check (`runtime.revocation.RevocationCheck`), a token that verifies is also
    refused (TOKEN_REVOKED) once its user signed out, was deactivated or changed role, or its API
    key was revoked: the registry's word, as the gateway asks it."""

    def __init__(
        self,
        tokens: TokenCodec,
        service: ServiceDescriptor,
        policy: Mapping[str, Access] | None = None,
        *,
        revocation: Callable[[Principal], Awaitable[None]] | None = None,
    ) -> None:
        methods = {method.name for method in service.methods}
        if policy is None:
            policy = dict.fromkeys(methods, Access.AUTHENTICATED)
        if set(policy) != methods:
            raise ValueError(
                f"{service.full_name} policy table out of date: missing {sorted(methods - set(policy))}, "
                f"unknown {sorted(set(policy) - methods)}"
            )
        if Access.PROJECT_OWNER in policy.values():
            raise ValueError("PROJECT_OWNER needs the data: check it in the service's rules")
        super().__init__()
        self._tokens = tokens
        self._prefix = f"/{service.full_name}/"
        self._policy = dict(policy)
        self._revocation = revocation

    def admission(self, method: str, handler: grpc.RpcMethodHandler) -> Admit | None:
        if not method.startswith(self._prefix):
            return None  # health, reflection
        access = self._policy[method.removeprefix(self._prefix)]

        def admitted(principal: Principal | None) -> None:
            authorize(access, principal)
            current_principal.set(principal)

        async def admitted_unless_revoked(
            principal: Principal, revocation: Callable[[Principal], Awaitable[None]]
        ) -> None:
            await revocation(principal)
            admitted(principal)

        def admit(request: Any, context: grpc.aio.ServicerContext) -> Awaitable[None] | None:
            if access is Access.PUBLIC:
                return admitted(None)
            principal = authenticate(self._tokens, context.invocation_metadata())
            if self._revocation is not None and not principal.is_system:
                return admitted_unless_revoked(principal, self._revocation)
            return admitted(principal)

        return admit


def admitted_handler(handler: grpc.RpcMethodHandler, admit: Admit) -> grpc.RpcMethodHandler:
    """`handler` with `admit` run first in each call: what it raises (a DomainError) fails the call
    through the shared server interceptor's status mapping, before the servicer runs. No agentmesh
    RPC streams requests: such a call (left unwrapped by the shared interceptor) is refused here
    with what `admit` raises, or PERMISSION_DENIED."""
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            _admitted_unary(handler.unary_unary, admit),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        # A coroutine function writes its responses with `context.write`; anything else
        # returns an async iterator of them (see the shared server interceptor).
        wrap = _admitted_unary if inspect.iscoroutinefunction(handler.unary_stream) else _admitted_stream
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream, admit),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return grpc.stream_stream_rpc_method_handler(
        _refused(admit),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


# Each call runs in its own context, so what `admit` sets (the principal) is the call's alone.
async def _admitted(admit: Admit, request: Any, context: grpc.aio.ServicerContext) -> None:
    waiting = admit(request, context)
    if waiting is not None:
        await waiting


def _admitted_unary(behavior: Behavior, admit: Admit) -> Behavior:
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _admitted(admit, request, context)
        return await behavior(request, context)

    return unary


def _admitted_stream(behavior: Behavior, admit: Admit) -> Behavior:
    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await _admitted(admit, request, context)
        async for response in behavior(request, context):
            yield response

    return stream


def _refused(admit: Admit) -> Behavior:
    async def refuse(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        try:
            await _admitted(admit, None, context)
            refusal: DomainError = PermissionDenied("no agentmesh RPC streams requests")
        except DomainError as error:
            refusal = error
        status = refusal.to_status()
        await context.abort(status.code, status.details, status.trailing_metadata)

    return refuse
