"""Turning the bearer credential of a request into its caller: an access token (JWT) or an API key
(`amk_…`), on every face (REST, SSE, the OpenAI API and gRPC metadata alike).

- Access tokens are verified locally, then checked against the user's current state, asked of the
  registry at most once a second per user and gateway (`runtime.revocation.RevocationCheck`, the
  same check every internal service makes). Logout, deactivation, deletion and role changes move
  the version on, so every replica refuses the old token (TOKEN_REVOKED) within that interval.
- API keys are validated by the registry (AuthenticateApiKey) at most once per interval per key,
  so a revoked key stops working within it. A valid key's caller carries a short-lived access
  token the gateway signs for the key's user: that, never the key, goes to the services behind.
- Failed key lookups are counted per client address: past the limit, that address's unknown keys
  are refused without asking the registry, so guessing costs the guesser, not the mesh.

Only successes are remembered, and only for the interval; nothing here logs a credential.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentmesh.gateway.client_address import peer_host
from agentmesh.gateway.errors import InvalidApiKey, RateLimited
from agentmesh.gateway.models import Caller
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.internal.registry.v1 import registry_internal_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.client import Metadata, unary
from agentmesh.runtime.errors import Unauthenticated
from agentmesh.runtime.identity import TOKEN_MISSING, Principal, TokenCodec
from agentmesh.runtime.revocation import RecentAnswers, RevocationCheck

API_KEY_PREFIX = "amk_"
_API_KEY_SHAPE = re.compile(r"^amk_[A-Za-z0-9_-]{43}$")
# Tokens signed for API key callers: renewed well before they expire, at a re-validation.
KEY_TOKEN_TTL_SECONDS = 300
_KEY_TOKEN_RENEW_SECONDS = 60


def is_api_key(credential: str) -> bool:
    """Whether a bearer credential is meant as an API key (its prefix), valid or not."""
    return credential.startswith(API_KEY_PREFIX)


def check_api_key_shape(credential: str) -> None:
    """Raises InvalidApiKey, without the key, unless it is `amk_` and 43 URL-safe characters."""
    if not _API_KEY_SHAPE.match(credential):
        raise InvalidApiKey("malformed API key: expected 'amk_' followed by 43 URL-safe characters")


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
        revocation: RevocationCheck,
        check_interval_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tokens = tokens
        self._registry = registry
        self._system_metadata = system_metadata
        self._failed_keys = failed_keys
        self._revocation = revocation
        self._clock = clock
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
        await self._revocation(principal)
        return Caller(principal, credential)

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
