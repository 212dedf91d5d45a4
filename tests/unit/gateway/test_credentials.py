"""Bearer credentials at the gateway: telling API keys from access tokens, their shape, the client
address failures count against, the short-lived memory of the registry's answers, and the
revocation and throttling rules of `CredentialVerifier` (over a registry fake)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from agentmesh.gateway.client_address import peer_host
from agentmesh.gateway.credentials import CredentialVerifier, check_api_key_shape, is_api_key
from agentmesh.gateway.errors import InvalidApiKey, RateLimited, TokenRevoked
from agentmesh.gateway.ratelimit import RateLimiter
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import Unauthenticated
from agentmesh.runtime.identity import SYSTEM, Principal, TokenCodec
from agentmesh.runtime.revocation import CredentialStatus, RecentAnswers, RevocationCheck

SECRET = "unit-test-secret-" + "x" * 32
GOOD_KEY = "amk_" + "Ab-_9" * 8 + "xyz"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_api_keys_are_told_from_tokens_by_their_prefix() -> None:
    assert is_api_key(GOOD_KEY) and is_api_key("amk_short")
    assert not is_api_key("eyJhbGciOiJIUzI1NiJ9.e30.sig") and not is_api_key("AMK_" + "a" * 43)


@pytest.mark.parametrize(
    "key",
    ["amk_short", "amk_" + "a" * 44, "amk_" + "a" * 42 + "!", "amk_" + "a" * 42 + " ", "amk_" + "é" * 43],
)
def test_a_malformed_key_is_refused_without_being_repeated(key: str) -> None:
    with pytest.raises(InvalidApiKey) as raised:
        check_api_key_shape(key)
    assert "malformed API key" in raised.value.message and key not in raised.value.message
    assert raised.value.reason == "API_KEY_INVALID"


def test_a_well_formed_key_passes_the_shape_check() -> None:
    assert len(GOOD_KEY) == 47
    check_api_key_shape(GOOD_KEY)


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:50123", "127.0.0.1"),
        ("ipv6:[::1]:50123", "::1"),
        ("::1", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("unix:/tmp/agentmesh.sock", "unix:/tmp/agentmesh.sock"),
        ("", ""),
    ],
)
def test_failures_count_per_client_address_not_per_connection(peer: str, address: str) -> None:
    assert peer_host(peer) == address


async def test_answers_are_remembered_for_the_ttl_only_and_shared_while_pending() -> None:
    clock = Clock()
    answers: RecentAnswers[str, int] = RecentAnswers(ttl_seconds=1.0, clock=clock)
    asked = 0
    release = asyncio.Event()

    async def ask() -> int:
        nonlocal asked
        asked += 1
        await release.wait()
        return asked

    pending = [asyncio.ensure_future(answers.get("ada", ask)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*pending) == [1] * 5 and asked == 1
    clock.now += 0.9
    assert await answers.get("ada", ask) == 1
    clock.now += 0.2
    assert await answers.get("ada", ask) == 2


async def test_failures_are_not_remembered() -> None:
    answers: RecentAnswers[str, int] = RecentAnswers(ttl_seconds=10.0, clock=Clock())

    async def fail() -> int:
        raise Unauthenticated("no")

    async def succeed() -> int:
        return 7

    with pytest.raises(Unauthenticated):
        await answers.get("k", fail)
    assert await answers.get("k", succeed) == 7


@dataclass
class FakeRegistry:
    """Stands in for the registry's answers on users and keys, counting the calls."""

    versions: dict[str, int] = field(default_factory=dict)
    inactive: set[str] = field(default_factory=set)
    keys: dict[str, str] = field(default_factory=dict)  # secret → user id
    calls: int = 0

    @property
    def internal_stub(self) -> FakeRegistry:
        return self

    async def status(self, user_id: str, api_key_id: str) -> CredentialStatus:
        """What the registry answers a revocation check (GetCredentialStatus)."""
        self.calls += 1
        if user_id not in self.versions:
            return CredentialStatus(user_active=False, token_version=0)
        return CredentialStatus(
            user_active=user_id not in self.inactive, token_version=self.versions[user_id]
        )

    async def AuthenticateApiKey(
        self, request: reg.AuthenticateApiKeyRequest, **_: object
    ) -> reg.AuthenticateApiKeyResponse:
        self.calls += 1
        user_id = self.keys.get(request.secret)
        if user_id is None:
            raise Unauthenticated("API key is unknown or revoked", reason="API_KEY_INVALID")
        return reg.AuthenticateApiKeyResponse(
            api_key=resources_pb2.ApiKey(id="k1", project_id="p1"),
            user=resources_pb2.User(id=user_id, email=f"{user_id}@example.com"),
            token_version=self.versions[user_id],
        )


def verifier(registry: FakeRegistry, clock: Clock, *, burst: int = 3) -> CredentialVerifier:
    return CredentialVerifier(
        tokens=TokenCodec(SECRET),
        registry=registry,  # type: ignore[arg-type]
        system_metadata=lambda: None,
        failed_keys=RateLimiter(rate_per_second=0.01, burst=burst, clock=clock),
        revocation=RevocationCheck(registry.status, clock=clock),
        clock=clock,
    )


async def test_tokens_of_an_older_version_or_an_inactive_user_are_revoked() -> None:
    clock, registry = Clock(), FakeRegistry(versions={"ada": 0, "bob": 0})
    credentials = verifier(registry, clock)
    tokens = TokenCodec(SECRET)
    ada = tokens.issue(Principal("ada", token_version=0))
    assert (await credentials.authenticate(ada)).user_id == "ada"

    registry.versions["ada"] = 1  # logout
    assert (await credentials.authenticate(ada)).user_id == "ada"  # within the interval
    clock.now += 1.0
    with pytest.raises(TokenRevoked):
        await credentials.authenticate(ada)
    assert (await credentials.authenticate(tokens.issue(Principal("ada", token_version=1)))).user_id == "ada"

    registry.inactive.add("bob")
    with pytest.raises(TokenRevoked, match="deactivated"):
        await credentials.authenticate(tokens.issue(Principal("bob")))
    with pytest.raises(TokenRevoked, match="no longer exists"):
        await credentials.authenticate(tokens.issue(Principal("carol")))


async def test_the_system_token_needs_no_registry() -> None:
    registry = FakeRegistry()
    caller = await verifier(registry, Clock()).authenticate(TokenCodec(SECRET).issue(SYSTEM))
    assert caller.principal is not None and caller.principal.is_system and registry.calls == 0


async def test_a_key_becomes_its_user_with_a_signed_token_reused_across_checks() -> None:
    clock, registry = Clock(), FakeRegistry(versions={"ada": 3}, keys={GOOD_KEY: "ada"})
    credentials = verifier(registry, clock)
    first = await credentials.authenticate(GOOD_KEY, peer="ipv4:10.0.0.1:1")
    assert first.user_id == "ada" and first.project_scope == "p1"
    assert first.token and first.token != GOOD_KEY
    # The token the services behind see names the key and its scope (who responds to a request
    # for input is the key; the registry holds the scope too).
    assert TokenCodec(SECRET).verify(first.token) == Principal(
        "ada", email="ada@example.com", token_version=3, api_key_id="k1", project_scope="p1"
    )
    clock.now += 1.5  # checked again, same user: same token
    again = await credentials.authenticate(GOOD_KEY, peer="ipv4:10.0.0.1:2")
    assert again.token == first.token and registry.calls == 2


async def test_failed_keys_are_throttled_per_address() -> None:
    clock, registry = Clock(), FakeRegistry(versions={"ada": 0}, keys={GOOD_KEY: "ada"})
    credentials = verifier(registry, clock, burst=3)
    guesser = "ipv4:10.0.0.9:4000"
    with pytest.raises(InvalidApiKey):
        await credentials.authenticate("amk_bad", peer=guesser)  # malformed keys count too
    for n in range(2):
        with pytest.raises(Unauthenticated):
            await credentials.authenticate(f"amk_{n:043d}", peer=guesser)
    calls = registry.calls
    with pytest.raises(RateLimited):
        await credentials.authenticate(f"amk_{9:043d}", peer="ipv4:10.0.0.9:4001")
    assert registry.calls == calls  # refused without asking the registry
    assert (await credentials.authenticate(GOOD_KEY, peer="ipv4:10.0.0.10:1")).user_id == "ada"


async def test_an_asker_going_away_cancels_nobody_elses_answer() -> None:
    answers: RecentAnswers[str, int] = RecentAnswers(ttl_seconds=1.0, clock=Clock())
    release = asyncio.Event()

    async def ask() -> int:
        await release.wait()
        return 42

    leaving = asyncio.ensure_future(answers.get("ada", ask))
    staying = asyncio.ensure_future(answers.get("ada", ask))
    await asyncio.sleep(0)
    leaving.cancel()
    release.set()
    assert await staying == 42
    assert leaving.cancelled()


async def test_a_token_newer_than_the_remembered_answer_is_checked_anew() -> None:
    """Signing in again after a role change gives a token of the next version while the old
    answer is still remembered: it is asked again, not refused."""
    clock, registry = Clock(), FakeRegistry(versions={"ada": 0})
    credentials = verifier(registry, clock)
    tokens = TokenCodec(SECRET)
    await credentials.authenticate(tokens.issue(Principal("ada", token_version=0)))
    registry.versions["ada"] = 1  # promoted: tokens of version 0 are void, new ones carry 1
    assert (await credentials.authenticate(tokens.issue(Principal("ada", token_version=1)))).user_id == "ada"
    assert registry.calls == 2
