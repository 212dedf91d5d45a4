"""Enforces the policy table (`policy.py`): authenticates callers, applies the per-user rate limit,
checks roles and project ownership, and counts a request against its project's requests a minute
— for gRPC in an interceptor, for HTTP in a dependency, both through `AccessGuard`. The gRPC
interceptor also holds a stream slot (`project_limits.OpenStreams`) for every server stream it
serves but A2A's (whose handler holds its own, for its HTTP bindings too)."""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Mapping
from contextvars import ContextVar
from typing import Any

import grpc

from agentmesh.gateway.budget import current_budget, request_budget
from agentmesh.gateway.client_address import FORWARDED_FOR, ClientAddresses
from agentmesh.gateway.credentials import CredentialVerifier
from agentmesh.gateway.errors import ApiKeyOutOfScope, InvalidRequest, NoPolicy
from agentmesh.gateway.models import Caller
from agentmesh.gateway.policy import (
    A2A_SERVICE,
    RPC_POLICY,
    Access,
    ProjectTarget,
    Rule,
    SessionTarget,
    Target,
)
from agentmesh.gateway.project_limits import OpenStreams, ProjectLimitsCache, RequestRates, admitted_project
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.memory.client import MemoryClient, SessionNotFound
from agentmesh.registry.client import ProjectNotFound, RegistryClient
from agentmesh.registry.v1 import registry_service_pb2
from agentmesh.runtime.client import unary
from agentmesh.runtime.errors import NotFound
from agentmesh.runtime.identity import (
    Admit,
    PolicyInterceptor,
    bearer_token,
    current_principal,
    current_token,
)
from agentmesh.runtime.identity import (
    authorize as require_access,
)

# The caller of the gRPC call being served, once the policy let it through.
_current_caller: ContextVar[Caller | None] = ContextVar("agentmesh_gateway_caller", default=None)


def current_caller() -> Caller:
    """The authorized caller of the gRPC call being served (nobody, on public RPCs)."""
    return _current_caller.get() or Caller()


class AccessGuard:
    """Decides whether a caller may perform an operation, by its policy rule, and counts what it
    lets through against the project's requests a minute; holds the gateway's count of open
    streams (`streams`) for the faces that open them."""

    def __init__(
        self,
        *,
        credentials: CredentialVerifier,
        registry: RegistryClient,
        memory: MemoryClient,
        limiter: RateLimiter,
        grant_ttl_seconds: float = 5.0,
        client_addresses: ClientAddresses | None = None,
        project_limits: ProjectLimitsCache | None = None,
        streams: OpenStreams | None = None,
        sign_ups: RateLimiter | None = None,
    ) -> None:
        self._credentials = credentials
        self._client_addresses = client_addresses or ClientAddresses()
        self._registry = registry
        self._memory = memory
        self._limiter = limiter
        # Registrations per client address (None: not limited).
        self._sign_ups = sign_ups
        self._grants = GrantCache(ttl_seconds=grant_ttl_seconds)
        # None: no project limit is counted here (a guard built without the registry's limits).
        self._project_limits = project_limits
        self._rates = RequestRates()
        self.streams = streams or OpenStreams()

    async def authorize(
        self, rule: Rule, token: str | None, subject: Any, *, peer: str = "", forwarded_for: str | None = None
    ) -> Caller:
        """The caller, when `rule` lets it perform the operation on `subject` (the gRPC request,
        or an HTTP route's path parameters); else raises the DomainError that says why not.
        Public operations act as nobody: a token sent along is neither checked nor forwarded;
        the client's address goes on to the service instead (sign-in is throttled by it), and
        registrations are counted against it here (`sign_ups`).
        Failed API keys are counted against the client's address: `peer`, or the client a trusted
        proxy names in `forwarded_for` (X-Forwarded-For; gateway/client_address.py)."""
        client = self._client_addresses.of(peer, forwarded_for)
        if rule.sign_up and self._sign_ups is not None:
            self._sign_ups.acquire(client)
        if rule.access is Access.PUBLIC:
            return Caller(client_address=client)
        caller = await self._credentials.authenticate(token, peer=client)
        self._limiter.acquire(caller.user_id)
        if caller.project_scope and rule.access is not Access.PROJECT_OWNER and not rule.scoped_keys:
            raise ApiKeyOutOfScope("this API key is scoped to one project and may only act within it")
        require_access(rule.access, caller.principal)  # SUPERUSER and SYSTEM
        if rule.access is Access.PROJECT_OWNER and not rule.target_in_body:
            assert rule.target is not None
            await self.check_target(caller, rule.target(subject))
        return caller

    async def check_target(self, caller: Caller, target: Target) -> None:
        """Raises NOT_FOUND unless the caller may see the project (or the session's project), and,
        with a scoped API key, unless it is the key's project; then counts the request against the
        project's requests a minute (QUOTA_EXCEEDED when over) and makes the project the one the
        request was admitted to (`admitted_project`). A superuser is held to no project's limits:
        operators must reach a project over its limits, to raise them."""
        if caller.is_superuser and not caller.project_scope:
            return
        if isinstance(target, ProjectTarget):
            await self._check_project(caller, target)
        else:
            await self._check_session(caller, target)

    async def _check_project(self, caller: Caller, target: ProjectTarget) -> None:
        if not target.id and not target.slug:
            raise InvalidRequest.field("project_id", "is required")
        if caller.project_scope and target.id and target.id != caller.project_scope:
            raise _project_not_found()
        grant = (caller.token, target.id, target.slug)
        if not self._grants.holds(grant):
            # The registry, acting as the caller, answers NOT_FOUND for projects it may not see.
            request = registry_service_pb2.GetProjectRequest(id=target.id, slug=target.slug)
            found = await unary(self._registry.stub.GetProject, request, metadata=caller.metadata)
            if caller.project_scope and found.project.id != caller.project_scope:
                raise _project_not_found()  # named by slug: known only now
            self._grants.add(grant)
            if self._project_limits is not None:
                self._project_limits.remember(found.project)
        if self._project_limits is not None:
            project = await self._project_limits.of(target)
            self._rates.admit(project)
            admitted_project.set(project)

    async def _check_session(self, caller: Caller, target: SessionTarget) -> None:
        if not target.session_id:
            raise InvalidRequest.field("session_id", "is required")
        if target.project_id:
            # The memory service finds the session within this project, or none.
            await self._check_project(caller, ProjectTarget(id=target.project_id))
            return
        try:
            session = await self._memory.get_session(target.session_id, metadata=caller.metadata)
        except NotFound:
            raise SessionNotFound(target.session_id) from None
        try:
            await self._check_project(caller, ProjectTarget(id=session.project_id))
        except NotFound:
            # Foreign sessions look exactly like unknown ones.
            raise SessionNotFound(target.session_id) from None


def _project_not_found() -> ProjectNotFound:
    # A scoped key sees other projects exactly as it would unknown ones.
    return ProjectNotFound("project not found")


class GrantCache:
    """Project checks that passed, remembered for a few seconds per token, so a chat does not ask
    the registry who owns its project every time. Only grants are remembered, never refusals, and
    only briefly: projects never change owners, so a grant can only outlive its project, by at
    most the TTL, and the registry refuses anything on a deleted project regardless.
    A TTL of 0 remembers nothing."""

    def __init__(self, *, ttl_seconds: float, capacity: int = 10_000) -> None:
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._expiries: OrderedDict[Hashable, float] = OrderedDict()

    def holds(self, grant: Hashable) -> bool:
        expiry = self._expiries.get(grant)
        if expiry is None:
            return False
        if expiry <= time.monotonic():
            del self._expiries[grant]
            return False
        return True

    def add(self, grant: Hashable) -> None:
        if self._ttl <= 0:
            return
        self._expiries[grant] = time.monotonic() + self._ttl
        self._expiries.move_to_end(grant)
        while len(self._expiries) > self._capacity:
            self._expiries.popitem(last=False)


class AuthorizationInterceptor(PolicyInterceptor):
    """Applies the RPC policy before any servicer or forwarder runs. An RPC without a policy
    entry is refused. Sits inside the shared server interceptor, which turns the DomainErrors
    raised here into statuses."""

    def __init__(self, guard: AccessGuard, policy: Mapping[str, Rule] = RPC_POLICY) -> None:
        super().__init__()
        self._guard = guard
        self._policy = policy

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        rule = self._policy.get(method)
        held = handler.unary_stream and rule is not None and rule.access is not Access.PUBLIC
        if held and not method.startswith(f"/{A2A_SERVICE.full_name}/"):
            handler = _holding_stream(handler, self._guard.streams)
        return super().wrap(handler, method)

    def admission(self, method: str, handler: grpc.RpcMethodHandler) -> Admit | None:
        rule = self._policy.get(method)
        if handler.request_streaming:
            if rule is not None and rule.access is Access.PUBLIC:
                return None  # server reflection: public, and a bidi stream there is nothing to check in
            return _refusal(f"{method} is not served by the gateway")
        if rule is None:
            return _refusal(f"{method} has no access policy and is not served")

        async def authorize(request: Any, context: grpc.aio.ServicerContext) -> None:
            metadata = context.invocation_metadata()
            forwarded_for = next((str(value) for key, value in metadata or () if key == FORWARDED_FOR), None)
            token = bearer_token(metadata)
            caller = await self._guard.authorize(
                rule, token, request, peer=context.peer() or "", forwarded_for=forwarded_for
            )
            _current_caller.set(caller)
            current_budget.set(request_budget(metadata or ()))
            current_principal.set(caller.principal)
            # Calls made on the caller's behalf carry its token, and only that (none when public).
            current_token.set(caller.token)

        return authorize


def _holding_stream(handler: grpc.RpcMethodHandler, streams: OpenStreams) -> grpc.RpcMethodHandler:
    """`handler` (a server stream) holding a stream slot of its caller and admitted project from
    its start to its end, however it ends; run after the policy admitted the call, so a stream
    over a limit is refused before its servicer runs."""
    behavior = handler.unary_stream
    if inspect.iscoroutinefunction(behavior):  # writes its responses with `context.write`

        async def held(request: Any, context: grpc.aio.ServicerContext) -> Any:
            with streams.holding(current_caller().user_id):
                return await behavior(request, context)

    else:

        async def held(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # type: ignore[misc]
            with streams.holding(current_caller().user_id):
                async for response in behavior(request, context):
                    yield response

    return grpc.unary_stream_rpc_method_handler(
        held,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _refusal(message: str) -> Admit:
    def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        raise NoPolicy(message)

    return refuse
