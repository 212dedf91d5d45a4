"""Whether a verified access token still stands: its signature and expiry say it was issued, not
that its user has not signed out, been deactivated, deleted or changed role since, nor that the API
key it was signed for is still valid. The registry owns those facts; every service that verifies
tokens (`AuthenticationInterceptor`, the gateway's `CredentialVerifier`) compares a token's claims
with them (`RevocationCheck`), asking at most once per interval (1 s) per user and key, so a
revocation is refused on every port within that interval.

The registry answers from its own store; other services ask it over
`agentmesh.common.v1.CredentialStatusService` (`registry_credential_status`), a protocol among the
common messages so that a service that may not know the registry's own API (memory) can ask too.
A verifier that cannot reach the registry refuses the call (it fails closed); the system
principal's tokens are never asked about (they name no user).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from agentmesh.common.v1 import credential_status_service_pb2 as pb
from agentmesh.common.v1 import credential_status_service_pb2_grpc as pb_grpc
from agentmesh.runtime.client import Metadata, unary
from agentmesh.runtime.errors import TokenRevoked
from agentmesh.runtime.identity import Principal

# How long a verifier relies on an answer: the bound on how late a revocation is refused.
CHECK_INTERVAL_SECONDS = 1.0
# A status request that takes longer fails the calls waiting on it rather than holding them for
# ever; generous, since a loaded registry answering late must not fail a caller's work.
STATUS_TIMEOUT_SECONDS = 30.0

K = TypeVar("K")
V = TypeVar("V")


class RecentAnswers(Generic[K, V]):
    """Answers of the registry remembered for at most `ttl_seconds`, with concurrent asks for one
    key sharing one call. The call runs as its own task, so a caller that goes away (a client
    hanging up) cancels neither it nor the others waiting on it. Failures are not remembered.
    Bounded: the oldest go first."""

    def __init__(
        self, *, ttl_seconds: float, capacity: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl_seconds
        self._capacity = capacity
        self._clock = clock
        self._answers: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._pending: dict[K, asyncio.Task[V]] = {}

    async def get(self, key: K, ask: Callable[[], Awaitable[V]]) -> V:
        hit = self._answers.get(key)
        if hit is not None and self._clock() - hit[1] < self._ttl:
            return hit[0]
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._remembered(key, ask))
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settled(key, done))
        return await asyncio.shield(task)

    def forget(self, key: K) -> None:
        """Drops the answer remembered for `key`: the next `get` asks anew."""
        self._answers.pop(key, None)

    async def _remembered(self, key: K, ask: Callable[[], Awaitable[V]]) -> V:
        answer = await ask()
        self._answers[key] = (answer, self._clock())
        self._answers.move_to_end(key)
        while len(self._answers) > self._capacity:
            self._answers.popitem(last=False)
        return answer

    def _settled(self, key: K, task: asyncio.Task[V]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
        if not task.cancelled():
            task.exception()  # retrieved, even when every asker has gone


@dataclass(frozen=True)
class CredentialStatus:
    """What the registry says of a user and one of its API keys now."""

    user_active: bool  # False for a deactivated or deleted user
    token_version: int
    api_key_active: bool = False  # the key named exists, is the user's, not revoked nor expired


# Asks the registry about (user id, API key id or "").
StatusSource = Callable[[str, str], Awaitable[CredentialStatus]]


class RevocationCheck:
    """Refuses (TOKEN_REVOKED) a principal whose token no longer stands, by the registry's answer
    of at most `interval_seconds` ago. Called with every verified principal."""

    def __init__(
        self,
        source: StatusSource,
        *,
        interval_seconds: float = CHECK_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._answers: RecentAnswers[tuple[str, str], CredentialStatus] = RecentAnswers(
            ttl_seconds=interval_seconds, clock=clock
        )

    async def __call__(self, principal: Principal) -> None:
        if principal.is_system:
            return
        user_id, key_id = principal.user_id, principal.api_key_id
        status = await self._answers.get((user_id, key_id), lambda: self._source(user_id, key_id))
        if principal.token_version > status.token_version:
            # Versions only move on: a token newer than the answer (signed in again after a role
            # change) means the answer is stale, not that the token is revoked.
            self._answers.forget((user_id, key_id))
            status = await self._answers.get((user_id, key_id), lambda: self._source(user_id, key_id))
        if not status.user_active:
            raise TokenRevoked("access token revoked: the account no longer exists or is deactivated")
        if status.token_version != principal.token_version:
            raise TokenRevoked("access token revoked (signed out, or the account changed); sign in again")
        if key_id and not status.api_key_active:
            raise TokenRevoked("access token revoked: its API key is revoked or expired")


def registry_credential_status(
    channel: grpc.aio.Channel, *, system_metadata: Callable[[], Metadata | None]
) -> StatusSource:
    """Asks the registry behind `channel` (a channel with this service's credential), as the
    system principal."""
    stub = pb_grpc.CredentialStatusServiceStub(channel)

    async def ask(user_id: str, api_key_id: str) -> CredentialStatus:
        request = pb.GetCredentialStatusRequest(user_id=user_id, api_key_id=api_key_id)
        answer = await unary(
            stub.GetCredentialStatus, request, timeout=STATUS_TIMEOUT_SECONDS, metadata=system_metadata()
        )
        return CredentialStatus(
            user_active=answer.user_active,
            token_version=answer.token_version,
            api_key_active=answer.api_key_active,
        )

    return ask
