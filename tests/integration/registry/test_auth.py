"""Identity over gRPC: register, login, refresh rotation, revocation, the current user, throttling,
token attacks, and the superuser bootstrap."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import grpc
import jwt
import pytest

from agentmesh.registry.app import start
from agentmesh.registry.settings import RegistrySettings
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.runtime.identity import Principal, TokenCodec
from tests.integration.registry.support import (
    JWT_SECRET,
    LOGIN_MAX_FAILURES,
    PASSWORD,
    SUPERUSER_EMAIL,
    SUPERUSER_PASSWORD,
    Api,
    bearer,
    make_settings,
    rpc_error,
    violation_fields,
)

GRPC = grpc.StatusCode


async def test_register_login_and_me(stub: pb_grpc.RegistryServiceStub) -> None:
    registered = await stub.RegisterUser(
        pb.RegisterUserRequest(email="  Ada@Example.COM ", password=PASSWORD, first_name="Ada", last_name="L")
    )
    user = registered.user
    assert user.id
    assert user.email == "ada@example.com"
    assert (user.first_name, user.last_name, user.is_superuser, user.is_active) == ("Ada", "L", False, True)
    assert user.created_at.seconds > 0

    login = await stub.Login(pb.LoginRequest(email="ADA@example.com", password=PASSWORD))
    tokens = login.tokens
    assert tokens.token_type == "bearer"
    assert tokens.expires_in == 900
    assert tokens.access_token and tokens.refresh_token
    assert tokens.refresh_token not in tokens.access_token

    me = await stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(tokens.access_token))
    assert me.user == user


async def test_register_never_confirms_a_taken_email_and_rejects_bad_fields(
    stub: pb_grpc.RegistryServiceStub,
) -> None:
    first = await stub.RegisterUser(pb.RegisterUserRequest(email="bob@example.com", password=PASSWORD))
    # The same answer as a new registration, but nothing changes: the owner's password still works,
    # the second one does not.
    again = await stub.RegisterUser(
        pb.RegisterUserRequest(email="BOB@example.com", password="another password 2", first_name="Eve")
    )
    assert (again.user.email, again.user.first_name, again.user.is_active) == ("bob@example.com", "Eve", True)
    assert again.user.id != first.user.id
    await stub.Login(pb.LoginRequest(email="bob@example.com", password=PASSWORD))
    wrong = await rpc_error(
        stub.Login(pb.LoginRequest(email="bob@example.com", password="another password 2"))
    )
    assert wrong.reason == "INVALID_CREDENTIALS"

    bad = await rpc_error(
        stub.RegisterUser(
            pb.RegisterUserRequest(email="not-an-email", password="short", first_name="x" * 101)
        )
    )
    assert bad.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(bad) == {"email", "password", "first_name"}
    missing = await rpc_error(stub.RegisterUser(pb.RegisterUserRequest()))
    assert violation_fields(missing) == {"email", "password"}


async def test_login_failures_do_not_tell_which_part_was_wrong(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    caller = await api.sign_up()
    wrong_password = await rpc_error(
        stub.Login(pb.LoginRequest(email=caller.user.email, password="nope-nope"))
    )
    unknown_email = await rpc_error(stub.Login(pb.LoginRequest(email="ghost@example.com", password=PASSWORD)))
    for error in (wrong_password, unknown_email):
        assert (error.code, error.reason, error.message) == (
            GRPC.UNAUTHENTICATED,
            "INVALID_CREDENTIALS",
            "wrong e-mail or password",
        )
    empty = await rpc_error(stub.Login(pb.LoginRequest()))
    assert empty.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(empty) == {"email", "password"}


async def test_repeated_failed_logins_are_throttled_per_account(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    victim = await api.sign_up()
    bystander = await api.sign_up()
    for _ in range(LOGIN_MAX_FAILURES):
        error = await rpc_error(
            stub.Login(pb.LoginRequest(email=victim.user.email, password="wrong-password"))
        )
        assert error.reason == "INVALID_CREDENTIALS"

    # Locked now: even the right password is refused, with when to retry.
    throttled = await rpc_error(stub.Login(pb.LoginRequest(email=victim.user.email, password=PASSWORD)))
    assert (throttled.code, throttled.reason) == (GRPC.RESOURCE_EXHAUSTED, "LOGIN_THROTTLED")
    assert 1 <= int(throttled.metadata["retry_after_seconds"]) <= 30

    # Another account is not affected.
    await stub.Login(pb.LoginRequest(email=bystander.user.email, password=PASSWORD))


async def test_throttling_lifts_after_the_lockout(database_url: str) -> None:
    # Long enough that a loaded CI machine still answers the throttled attempt inside it.
    service = await start(make_settings(database_url, login_max_failures=2, login_lockout_seconds=2.0))
    try:
        async with grpc.aio.insecure_channel(service.address) as channel:
            api = Api(pb_grpc.RegistryServiceStub(channel))
            caller = await api.sign_up()
            for _ in range(2):
                await rpc_error(
                    api.stub.Login(pb.LoginRequest(email=caller.user.email, password="wrong-password"))
                )
            throttled = await rpc_error(
                api.stub.Login(pb.LoginRequest(email=caller.user.email, password=PASSWORD))
            )
            assert throttled.reason == "LOGIN_THROTTLED"
            await asyncio.sleep(2.1)
            await api.stub.Login(pb.LoginRequest(email=caller.user.email, password=PASSWORD))
            # A success resets the count: one more failure does not lock again.
            await rpc_error(
                api.stub.Login(pb.LoginRequest(email=caller.user.email, password="wrong-password"))
            )
            await api.stub.Login(pb.LoginRequest(email=caller.user.email, password=PASSWORD))
    finally:
        await service.stop(0)


async def test_refresh_rotates_and_a_used_token_revokes_the_sign_in(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    caller = await api.sign_up()
    first = (await stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=caller.refresh_token))).tokens
    assert first.refresh_token != caller.refresh_token
    me = await stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(first.access_token))
    assert me.user.id == caller.user.id

    # The old token was single-use: presenting it again is treated as theft.
    reused = await rpc_error(stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=caller.refresh_token)))
    assert (reused.code, reused.reason) == (GRPC.UNAUTHENTICATED, "REFRESH_TOKEN_REUSED")
    # ... which revoked every token of that sign-in, the newest included.
    revoked = await rpc_error(stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=first.refresh_token)))
    assert (revoked.code, revoked.reason) == (GRPC.UNAUTHENTICATED, "REFRESH_TOKEN_INVALID")

    # Another sign-in of the same user is unaffected.
    tokens = (await stub.Login(pb.LoginRequest(email=caller.user.email, password=PASSWORD))).tokens
    await stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=tokens.refresh_token))


async def test_refresh_rejects_unknown_and_empty_tokens(stub: pb_grpc.RegistryServiceStub) -> None:
    unknown = await rpc_error(stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token="made-up")))
    assert (unknown.code, unknown.reason) == (GRPC.UNAUTHENTICATED, "REFRESH_TOKEN_INVALID")
    empty = await rpc_error(stub.RefreshTokens(pb.RefreshTokensRequest()))
    assert empty.code == GRPC.INVALID_ARGUMENT
    assert violation_fields(empty) == {"refresh_token"}


async def test_refresh_tokens_expire(database_url: str) -> None:
    service = await start(make_settings(database_url, refresh_token_ttl_seconds=1))
    try:
        async with grpc.aio.insecure_channel(service.address) as channel:
            api = Api(pb_grpc.RegistryServiceStub(channel))
            caller = await api.sign_up()
            await asyncio.sleep(1.1)
            expired = await rpc_error(
                api.stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=caller.refresh_token))
            )
            assert expired.reason == "REFRESH_TOKEN_INVALID"
    finally:
        await service.stop(0)


async def test_revoking_a_refresh_token_ends_its_sign_in(stub: pb_grpc.RegistryServiceStub, api: Api) -> None:
    caller = await api.sign_up()
    await stub.RevokeRefreshToken(pb.RevokeRefreshTokenRequest(refresh_token=caller.refresh_token))
    error = await rpc_error(stub.RefreshTokens(pb.RefreshTokensRequest(refresh_token=caller.refresh_token)))
    assert error.reason == "REFRESH_TOKEN_INVALID"
    # Idempotent, and silent about tokens that never existed.
    await stub.RevokeRefreshToken(pb.RevokeRefreshTokenRequest(refresh_token=caller.refresh_token))
    await stub.RevokeRefreshToken(pb.RevokeRefreshTokenRequest(refresh_token="never-issued"))


def _forge_unsigned(claims: dict) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


async def test_token_attacks_are_unauthenticated(
    stub: pb_grpc.RegistryServiceStub, api: Api, codec: TokenCodec
) -> None:
    caller = await api.sign_up()
    now = int(time.time())
    claims = {
        "sub": caller.user.id,
        "su": True,
        "iss": "agentmesh",
        "iat": now,
        "exp": now + 600,
        "typ": "access",
    }
    header, payload, signature = caller.access_token.split(".")
    tampered_claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    tampered_claims["su"] = True
    tampered_payload = base64.urlsafe_b64encode(json.dumps(tampered_claims).encode()).rstrip(b"=").decode()
    attacks = {
        "alg=none": _forge_unsigned(claims),
        "wrong secret": jwt.encode(claims, "another-secret-" + "x" * 40, algorithm="HS256"),
        "tampered claims": f"{header}.{tampered_payload}.{signature}",
        "expired": jwt.encode(
            {**claims, "iat": now - 7200, "exp": now - 3600}, JWT_SECRET, algorithm="HS256"
        ),
        "not an access token": jwt.encode({**claims, "typ": "refresh"}, JWT_SECRET, algorithm="HS256"),
        "other issuer": jwt.encode({**claims, "iss": "evil"}, JWT_SECRET, algorithm="HS256"),
        "garbage": "not.a.jwt",
        "refresh token as access token": caller.refresh_token,
    }
    for name, token in attacks.items():
        for method, request in (
            (stub.GetCurrentUser, pb.GetCurrentUserRequest()),
            (stub.ListProjects, pb.ListProjectsRequest()),
            (stub.CreateAgentType, pb.CreateAgentTypeRequest()),
        ):
            error = await rpc_error(method(request, metadata=bearer(token)))
            assert error.code == GRPC.UNAUTHENTICATED, name
            assert error.reason in ("TOKEN_INVALID", "TOKEN_EXPIRED"), name
    expired = await rpc_error(
        stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(attacks["expired"]))
    )
    assert expired.reason == "TOKEN_EXPIRED"

    missing = await rpc_error(stub.GetCurrentUser(pb.GetCurrentUserRequest()))
    assert (missing.code, missing.reason) == (GRPC.UNAUTHENTICATED, "TOKEN_MISSING")
    wrong_scheme = await rpc_error(
        stub.GetCurrentUser(
            pb.GetCurrentUserRequest(), metadata=(("authorization", f"Basic {caller.access_token}"),)
        )
    )
    assert wrong_scheme.code == GRPC.UNAUTHENTICATED
    # A correctly signed token still works after all that.
    ok = codec.issue(Principal(user_id=caller.user.id))
    assert (
        await stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(ok))
    ).user.id == caller.user.id


async def test_superuser_is_bootstrapped_idempotently(
    registry_settings: RegistrySettings, stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    root = await api.root()
    assert root.user.is_superuser
    assert root.user.email == SUPERUSER_EMAIL

    # A second start on the same database (another replica, or a restart) changes nothing.
    again = await start(registry_settings)
    try:
        async with grpc.aio.insecure_channel(again.address) as channel:
            other = pb_grpc.RegistryServiceStub(channel)
            tokens = (
                await other.Login(pb.LoginRequest(email=SUPERUSER_EMAIL, password=SUPERUSER_PASSWORD))
            ).tokens
            me = await other.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(tokens.access_token))
    finally:
        await again.stop(0)
    assert me.user.id == root.user.id


async def test_bootstrap_promotes_an_existing_user(database_url: str) -> None:
    first = await start(make_settings(database_url, superuser_email=""))
    try:
        async with grpc.aio.insecure_channel(first.address) as channel:
            api = Api(pb_grpc.RegistryServiceStub(channel))
            caller = await api.sign_up("promoted@example.com")
            assert not caller.user.is_superuser
    finally:
        await first.stop(0)
    second = await start(make_settings(database_url, superuser_email="promoted@example.com"))
    try:
        async with grpc.aio.insecure_channel(second.address) as channel:
            stub = pb_grpc.RegistryServiceStub(channel)
            # The existing password is kept.
            tokens = (
                await stub.Login(pb.LoginRequest(email="promoted@example.com", password=PASSWORD))
            ).tokens
            me = await stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(tokens.access_token))
            assert me.user.is_superuser
    finally:
        await second.stop(0)


async def test_system_principal_is_not_a_user(stub: pb_grpc.RegistryServiceStub, codec: TokenCodec) -> None:
    error = await rpc_error(
        stub.GetCurrentUser(pb.GetCurrentUserRequest(), metadata=bearer(codec.system_token()))
    )
    assert (error.code, error.reason) == (GRPC.NOT_FOUND, "USER_NOT_FOUND")


async def test_unusable_superuser_settings_stop_the_start(database_url: str) -> None:
    with pytest.raises(ValueError, match="password must be at least 12 characters"):
        await start(make_settings(database_url, superuser_password="short"))
