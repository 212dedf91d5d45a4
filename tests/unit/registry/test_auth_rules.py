"""Password hashing parameters, refresh-token digests and the sign-in throttle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from argon2 import Parameters, Type, extract_parameters

from agentmesh.registry.identity.auth import Passwords, RefreshTokenCodec
from agentmesh.registry.identity.sign_in_throttle import LoginThrottle
from agentmesh.registry.models import LoginState
from agentmesh.registry.settings import RegistrySettings

T0 = datetime(2025, 1, 1, tzinfo=UTC)


async def test_default_password_hashes_are_argon2id_with_owasp_parameters() -> None:
    settings = RegistrySettings(jwt_secret="x" * 32)
    passwords = Passwords(
        time_cost=settings.password_hash_time_cost,
        memory_kib=settings.password_hash_memory_kib,
        parallelism=settings.password_hash_parallelism,
    )
    password_hash = await passwords.hash("correct horse")
    parameters: Parameters = extract_parameters(password_hash)
    assert (parameters.type, parameters.memory_cost, parameters.time_cost, parameters.parallelism) == (
        Type.ID,
        19456,
        2,
        1,
    )
    assert await passwords.verify(password_hash, "correct horse")
    assert not await passwords.verify(password_hash, "wrong horse")
    assert not await passwords.verify("not a hash", "correct horse")
    assert not passwords.needs_rehash(password_hash)
    # Hashes made with weaker parameters are upgraded at the next sign-in.
    assert passwords.needs_rehash(await Passwords(time_cost=1, memory_kib=64).hash("x"))


def test_refresh_tokens_are_random_and_stored_as_keyed_digests() -> None:
    codec = RefreshTokenCodec("s" * 32)
    token, digest = codec.new()
    other, _ = codec.new()
    assert token != other and len(token) >= 40
    assert digest == codec.digest(token) and token not in digest and len(digest) == 64
    assert RefreshTokenCodec("t" * 32).digest(token) != digest


def test_throttle_locks_after_the_limit_and_doubles() -> None:
    throttle = LoginThrottle(max_failures=3, window_seconds=60, lockout_seconds=10, max_lockout_seconds=25)
    state = LoginState()
    for i in range(2):
        state = throttle.failed(state, T0 + timedelta(seconds=i))
        assert throttle.retry_after(state, T0 + timedelta(seconds=i)) is None
    state = throttle.failed(state, T0 + timedelta(seconds=2))
    assert state.failed_count == 3
    assert throttle.retry_after(state, T0 + timedelta(seconds=2)) == 10
    assert throttle.retry_after(state, T0 + timedelta(seconds=11.5)) == 1
    assert throttle.retry_after(state, T0 + timedelta(seconds=12)) is None
    state = throttle.failed(state, T0 + timedelta(seconds=13))
    assert throttle.retry_after(state, T0 + timedelta(seconds=13)) == 20
    state = throttle.failed(state, T0 + timedelta(seconds=40))
    assert throttle.retry_after(state, T0 + timedelta(seconds=40)) == 25  # capped


def test_throttle_forgets_failures_outside_the_window() -> None:
    throttle = LoginThrottle(max_failures=2, window_seconds=60, lockout_seconds=10)
    state = throttle.failed(LoginState(), T0)
    state = throttle.failed(state, T0 + timedelta(seconds=61))
    assert state.failed_count == 1
    assert throttle.retry_after(state, T0 + timedelta(seconds=61)) is None
