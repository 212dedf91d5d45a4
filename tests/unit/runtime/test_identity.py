"""Access tokens: issued and verified with one secret; verified tokens are remembered only until
they expire, and only by their exact text."""

from __future__ import annotations

import time

import jwt
import pytest

from agentmesh.runtime.errors import Unauthenticated
from agentmesh.runtime.identity import Principal, TokenCodec, caller, current_principal

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
