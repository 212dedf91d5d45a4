"""Access tokens and service credentials: issued and verified with one secret; verified ones are
remembered only until they expire, and only by their exact text."""

from __future__ import annotations

import time

import jwt
import pytest

from agentmesh.runtime.errors import Unauthenticated
from agentmesh.runtime.identity import Principal, TokenCodec, VerifiedTokens, caller, current_principal
from agentmesh.runtime.service_identity import ServiceCredentials

SECRET = "s" * 40


def test_a_token_verifies_to_its_principal_again_and_again() -> None:
    codec = TokenCodec(SECRET)
    alice = Principal(user_id="u1", is_superuser=False, email="alice@example.com")
    token = codec.issue(alice)
    assert codec.verify(token) == alice
    assert codec.verify(token) == alice


def test_a_remembered_token_is_still_rejected_once_it_expires() -> None:
    codec = TokenCodec(SECRET)
    token = codec.issue(Principal(user_id="u1"), ttl_seconds=1)
    assert codec.verify(token).user_id == "u1"
    time.sleep(1.2)
    with pytest.raises(Unauthenticated) as raised:
        codec.verify(token)
    assert raised.value.reason == "TOKEN_EXPIRED"


def test_an_altered_token_is_not_taken_for_the_remembered_one() -> None:
    codec = TokenCodec(SECRET)
    token = codec.issue(Principal(user_id="u1"))
    codec.verify(token)
    header, payload, signature = token.split(".")
    tampered = f"{header}.{payload}.{signature[:-2]}{'AA' if signature[-2:] != 'AA' else 'BB'}"
    with pytest.raises(Unauthenticated):
        codec.verify(tampered)


def test_tokens_of_another_secret_or_none_algorithm_are_rejected() -> None:
    codec = TokenCodec(SECRET)
    other = TokenCodec("o" * 40).issue(Principal(user_id="u1"))
    unsigned = jwt.encode(
        {"sub": "u1", "su": True, "typ": "access", "iss": "agentmesh", "iat": 0, "exp": 2**31},
        key=None,
        algorithm="none",
    )
    for token in (other, unsigned):
        with pytest.raises(Unauthenticated):
            codec.verify(token)


def test_tokens_carry_the_users_token_version() -> None:
    codec = TokenCodec(SECRET)
    assert codec.verify(codec.issue(Principal("ada", token_version=4))).token_version == 4
    claims = jwt.decode(codec.issue(Principal("ada")), SECRET, algorithms=["HS256"], issuer="agentmesh")
    del claims["ver"]
    older = jwt.encode(claims, SECRET, algorithm="HS256")  # issued before versions existed
    assert codec.verify(older).token_version == 0


def test_caller_is_the_authenticated_principal_and_refuses_a_call_without_one() -> None:
    alice = Principal(user_id="alice")
    token = current_principal.set(alice)
    try:
        assert caller() == alice
    finally:
        current_principal.reset(token)
    with pytest.raises(Unauthenticated) as refused:
        caller()
    assert refused.value.reason == "TOKEN_MISSING"


def test_verified_tokens_are_remembered_until_they_expire_and_within_their_bound() -> None:
    now = [1000.0]
    verified: VerifiedTokens[str] = VerifiedTokens(size=2, clock=lambda: now[0])
    verified.put("a", "alice", expires_at=1010.0)
    verified.put("b", "bob", expires_at=1100.0)
    assert verified.get("a") == "alice"  # and now the most recently used
    verified.put("c", "carol", expires_at=1100.0)
    assert verified.get("b") is None, "the least recently used went"
    assert verified.get("a") == "alice"
    now[0] = 1010.0
    assert verified.get("a") is None, "not at its expiry"
    assert verified.get("c") == "carol"


def test_a_remembered_service_credential_is_refused_once_it_expires() -> None:
    credentials = ServiceCredentials(SECRET, service="executor", ttl_seconds=3)
    credential = credentials.credential()
    assert credentials.verify(credential) == "executor"
    assert credentials.verify(credential) == "executor"
    expires_at = jwt.decode(credential, options={"verify_signature": False})["exp"]
    while time.time() < expires_at:
        time.sleep(0.2)
    with pytest.raises(Unauthenticated) as raised:
        credentials.verify(credential)
    assert raised.value.reason == "SERVICE_CREDENTIAL_INVALID"
