"""Turning the bearer credential of a request into its caller: an access token (JWT) or an API key
(`amk_…`), on every face (REST, SSE, the OpenAI API and gRPC metadata alike).

- Access tokens are verified locally, then their `ver` claim is compared with the user's current
  token version, asked of the registry (GetUserStatus) at most once per `check_interval_seconds`
  per user and gateway. Logout, deactivation, deletion and role changes move the version on, so
  every replica refuses the old token (TOKEN_REVOKED) within that interval.
- API keys are validated by the registry (AuthenticateApiKey) at most once per interval per key,
  so a revoked key stops working within it. A valid key's caller carries a short-lived access
  token the gateway signs for the key's user: that, never the key, goes to the services behind.
- Failed key lookups are counted per client address: past the limit, that address's unknown keys
  are refused without asking the registry, so guessing costs the guesser, not the mesh.

Only successes are remembered, and only for the interval; nothing here logs a credential.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from agentmesh.gateway.client_address import peer_host
from agentmesh.gateway.errors import InvalidApiKey, RateLimited, TokenRevoked
from agentmesh.gateway.models import Caller
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata, unary
from agentmesh.runtime.errors import Unauthenticated
from agentmesh.runtime.identity import TOKEN_MISSING, Principal, TokenCodec

API_KEY_PREFIX = "amk_"
_API_KEY_SHAPE = re.compile(r"^amk_[A-Za-z0-9_-]{43}$")
# Tokens signed for API key callers: renewed well before they expire, at a re-validation.
KEY_TOKEN_TTL_SECONDS = 300
_KEY_TOKEN_RENEW_SECONDS = 60

K = TypeVar("K")
V = TypeVar("V")


def is_api_key(credential: str) -> bool:
    """Whether a bearer credential is meant as an API key (its prefix), valid or not."""
    return credential.startswith(API_KEY_PREFIX)


def check_api_key_shape(credential: str) -> None:
    """Raises InvalidApiKey, without the key, unless it is `amk_` and 43 URL-safe characters."""
    if not _API_KEY_SHAPE.match(credential):
        raise InvalidApiKey("malformed API key: expected 'amk_' followed by 43 URL-safe characters")


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
class _KeyCaller:
    """What an API key stood for at its last validation."""

    principal: Principal
    project_scope: str


class CredentialVerifier:
    """Authenticates bearer credentials for `AccessGuard` (see the module's docstring)."""

    def __init__(
        self,
        *,
        tokens: TokenCodec,
        registry: RegistryClient,
        system_metadata: Callable[[], Metadata | None],
        failed_keys: RateLimiter,
        check_interval_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tokens = tokens
        self._registry = registry
        self._system_metadata = system_metadata
        self._failed_keys = failed_keys
        self._clock = clock
        self._statuses: RecentAnswers[str, registry_internal_service_pb2.GetUserStatusResponse] = (
            RecentAnswers(ttl_seconds=check_interval_seconds, clock=clock)
        )
        self._keys: RecentAnswers[str, _KeyCaller] = RecentAnswers(
            ttl_seconds=check_interval_seconds, clock=clock
        )
        # Key digest → (principal, signed token, when to sign anew).
        self._key_tokens: dict[str, tuple[Principal, str, float]] = {}

    async def authenticate(self, credential: str | None, *, peer: str = "") -> Caller:
        if not credential:
            raise Unauthenticated("missing bearer token", reason=TOKEN_MISSING)
        if is_api_key(credential):
            return await self._api_key_caller(credential, peer_host(peer))
        principal = self._tokens.verify(credential)
        if not principal.is_system:
            await self._check_not_revoked(principal)
        return Caller(principal, credential)

    async def _check_not_revoked(self, principal: Principal) -> None:
        status = await self._statuses.get(principal.user_id, lambda: self._user_status(principal.user_id))
        if not status.exists or not status.is_active:
            raise TokenRevoked("access token revoked: the account no longer exists or is deactivated")
        if status.token_version != principal.token_version:
            raise TokenRevoked("access token revoked (signed out, or the account changed); sign in again")

    async def _user_status(self, user_id: str) -> registry_internal_service_pb2.GetUserStatusResponse:
        request = registry_internal_service_pb2.GetUserStatusRequest(user_id=user_id)
        return await unary(
            self._registry.internal_stub.GetUserStatus, request, metadata=self._system_metadata()
        )  # type: ignore[no-any-return]

    async def _api_key_caller(self, key: str, address: str) -> Caller:
        wait = self._failed_keys.wait_seconds(address)
        if wait > 0:
            raise RateLimited(wait)
        digest = hashlib.sha256(key.encode()).hexdigest()
        try:
            check_api_key_shape(key)
            found = await self._keys.get(digest, lambda: self._validate_key(key))
        except Unauthenticated:
            self._failed_keys.try_acquire(address)
            raise
        return Caller(
            found.principal, self._key_token(digest, found.principal), project_scope=found.project_scope
        )

    async def _validate_key(self, key: str) -> _KeyCaller:
        request = registry_internal_service_pb2.AuthenticateApiKeyRequest(secret=key)
        answer = await unary(
            self._registry.internal_stub.AuthenticateApiKey, request, metadata=self._system_metadata()
        )
        # The services behind see the key in the token the gateway signs for it (`_key_token`):
        # who responds to a request for input is the key, not its user.
        principal = Principal(
            user_id=answer.user.id,
            is_superuser=answer.user.is_superuser,
            email=answer.user.email,
            token_version=answer.token_version,
            api_key_id=answer.api_key.id,
            project_scope=answer.api_key.project_id,
        )
        return _KeyCaller(principal, answer.api_key.project_id)

    def _key_token(self, digest: str, principal: Principal) -> str:
        """The access token an API key's calls carry behind the gateway: reused while the key's
        user is unchanged, so the services' verification caches keep working."""
        now = self._clock()
        held = self._key_tokens.get(digest)
        if held is not None and held[0] == principal and now < held[2]:
            return held[1]
        token = self._tokens.issue(principal, ttl_seconds=KEY_TOKEN_TTL_SECONDS)
        if len(self._key_tokens) >= 10_000:
            self._key_tokens.clear()
        self._key_tokens[digest] = (principal, token, now + KEY_TOKEN_TTL_SECONDS - _KEY_TOKEN_RENEW_SECONDS)
        return token
