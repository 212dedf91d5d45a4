"""What the HTTP routes work with, and the dependency that applies the policy table to every route."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from fastapi import Request

from agentmesh.gateway.access import AccessGuard
from agentmesh.gateway.budget import current_budget, request_budget
from agentmesh.gateway.errors import ClientDisconnected, NoPolicy
from agentmesh.gateway.gateway import AgentGateway
from agentmesh.gateway.http.a2a_face import A2AFace
from agentmesh.gateway.models import Caller
from agentmesh.gateway.policy import Rule, route_rule
from agentmesh.memory.client import MemoryClient
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import unary
from agentmesh.runtime.identity import current_principal, current_token

R = TypeVar("R")


@dataclass(frozen=True)
class HttpContext:
    """The gateway's pieces the HTTP face uses; built by the composition root."""

    guard: AccessGuard
    registry: RegistryClient
    memory: MemoryClient
    gateway: AgentGateway
    max_chat_messages: int
    public_url: str = ""
    # Peers /readyz checks: (name, channel).
    dependencies: Sequence[tuple[str, grpc.aio.Channel]] = ()
    # The A2A bindings (http/a2a.py); None where a test builds the app without them.
    a2a: A2AFace | None = None

    async def call(self, method: Any, request: Any, caller: Caller) -> Any:
        """A unary call to a peer as the caller; failures raise the peer's DomainError."""
        return await unary(method, request, metadata=caller.metadata)


def context(request: Request) -> HttpContext:
    return request.app.state.context


def rule_of(request: Request) -> Rule:
    route = request.scope.get("route")
    rule = route_rule(request.method, getattr(route, "path", ""))
    if rule is None:
        raise NoPolicy(f"{request.method} {request.url.path} has no access policy and is not served")
    return rule


async def authorize(request: Request) -> Caller:
    """Every route's first dependency: the route's policy rule, applied to the bearer token and
    the path parameters. Routes whose project is named in the body finish the check with
    `authorize_body` once it is parsed."""
    return await authorize_as(request, rule_of(request))


async def authorize_as(request: Request, rule: Rule) -> Caller:
    """The request's caller, when `rule` lets it perform the operation on the path parameters:
    for a route whose own rule is public but that serves more to a caller who proves more."""
    peer = request.client.host if request.client else ""
    caller = await context(request).guard.authorize(
        rule,
        _bearer(request),
        request.path_params,
        peer=peer,
        forwarded_for=request.headers.get("x-forwarded-for"),
    )
    current_principal.set(caller.principal)
    current_token.set(caller.token)
    current_budget.set(request_budget(request.headers.items()))
    return caller


async def authorize_body(request: Request, caller: Caller, body: Any) -> None:
    rule = rule_of(request)
    if rule.target_in_body:
        assert rule.target is not None
        await context(request).guard.check_target(caller, rule.target(body))


def has_bearer(request: Request) -> bool:
    return _bearer(request) is not None


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def until_disconnected(request: Request, work: Awaitable[R]) -> R:
    """Awaits `work`, cancelling it when the client goes away first (a chat's run stops below)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        raise ClientDisconnected()
    finally:
        watcher.cancel()
        task.cancel()


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
