"""Sign-in throttling by account and client address, the same answers for unknown accounts, and
the password policy, through the registry's RegistryService on both databases. The gateway names
the client address in `x-agentmesh-client-address` on calls that carry its service credential;
the `stub` fixture's channel carries one, so these tests speak as the gateway would."""

from __future__ import annotations

import uuid

import grpc
import pytest

from agentmesh.registry.app import start
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from agentmesh.runtime.client_address import CLIENT_ADDRESS
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.service import RunningService
from tests.bearer import service_channel
from tests.integration.registry.support import (
    JWT_SECRET,
    LOGIN_MAX_FAILURES,
    PASSWORD,
    Api,
    make_settings,
    rpc_error,
    violation_fields,
)

GRPC = grpc.StatusCode
ATTACKER = "198.51.100.7"
OWNER = "203.0.113.9"


def at(address: str) -> tuple[tuple[str, str], ...]:
    return ((CLIENT_ADDRESS, address),)


async def _login_error(
    stub: pb_grpc.RegistryServiceStub, email: str, password: str, address: str
) -> DomainError:
    return await rpc_error(stub.Login(pb.LoginRequest(email=email, password=password), metadata=at(address)))


async def test_a_guesser_elsewhere_does_not_lock_the_owner_out(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    owner = await api.sign_up()
    for _ in range(LOGIN_MAX_FAILURES):
        error = await _login_error(stub, owner.user.email, "wrong-password-0", ATTACKER)
        assert error.reason == "INVALID_CREDENTIALS"

    # The guesser's address is locked out of the account, even with the right password ...
    throttled = await _login_error(stub, owner.user.email, PASSWORD, ATTACKER)
    assert (throttled.code, throttled.reason) == (GRPC.RESOURCE_EXHAUSTED, "LOGIN_THROTTLED")
    # ... and the owner, from another address, signs in.
    await stub.Login(pb.LoginRequest(email=owner.user.email, password=PASSWORD), metadata=at(OWNER))


async def test_unknown_emails_answer_and_lock_exactly_as_known_ones(
    stub: pb_grpc.RegistryServiceStub, api: Api
) -> None:
    known = (await api.sign_up()).user.email
    unknown = f"ghost-{uuid.uuid4().hex[:8]}@example.com"
    answers: dict[str, list[tuple[object, str, str]]] = {known: [], unknown: []}
    for email in (known, unknown):
        for _ in range(LOGIN_MAX_FAILURES + 1):
            error = await _login_error(stub, email, "wrong-password-0", ATTACKER)
            answers[email].append((error.code, error.reason, error.message.split(";")[0]))
    assert answers[known] == answers[unknown]
    assert answers[unknown][-1] == (GRPC.RESOURCE_EXHAUSTED, "LOGIN_THROTTLED", "too many failed sign-ins")


@pytest.fixture
async def sprayable_registry(database_url: str) -> RunningService:
    service = await start(make_settings(database_url, login_address_max_failures=4))
    yield service  # type: ignore[misc]
    await service.stop(0)


async def test_spraying_many_accounts_from_one_address_is_refused(
    sprayable_registry: RunningService,
) -> None:
    async with service_channel(sprayable_registry.address, JWT_SECRET) as channel:
        stub = pb_grpc.RegistryServiceStub(channel)
        victim = await Api(stub).sign_up()
        for n in range(4):  # one guess each at four accounts: no single account is near its limit
            error = await _login_error(stub, f"user-{n}@example.com", "wrong-password-0", ATTACKER)
            assert error.reason == "INVALID_CREDENTIALS"
        throttled = await _login_error(stub, victim.user.email, PASSWORD, ATTACKER)
        assert throttled.reason == "LOGIN_THROTTLED"
        await stub.Login(pb.LoginRequest(email=victim.user.email, password=PASSWORD), metadata=at(OWNER))


async def test_a_client_address_nobody_vouches_for_is_ignored(
    registry_service: RunningService, api: Api
) -> None:
    owner = await api.sign_up()
    # No service credential: the claimed addresses are ignored, every call counts as its peer's.
    async with grpc.aio.insecure_channel(registry_service.address) as plain:
        bare = pb_grpc.RegistryServiceStub(plain)
        for n in range(LOGIN_MAX_FAILURES):
            await _login_error(bare, owner.user.email, "wrong-password-0", f"198.51.100.{n}")
        throttled = await _login_error(bare, owner.user.email, PASSWORD, "198.51.100.200")
    assert throttled.reason == "LOGIN_THROTTLED"


async def test_the_password_policy_refuses_short_and_common_passwords(
    stub: pb_grpc.RegistryServiceStub,
) -> None:
    for password, rule in (
        ("eleven-char", "must be at least 12 characters"),
        ("qwerty123456", "is one of the most common passwords: choose another"),
        ("  QWERTY123456 ", "is one of the most common passwords: choose another"),
    ):
        error = await rpc_error(
            stub.RegisterUser(pb.RegisterUserRequest(email="new@example.com", password=password))
        )
        assert error.code == GRPC.INVALID_ARGUMENT
        assert [(v.field, v.description) for v in error.violations] == [("password", rule)]
        assert password.strip() not in error.message  # never echoed


async def test_users_registered_under_an_older_policy_still_sign_in(database_url: str) -> None:
    email, short = "old-timer@example.com", "ten-chars!"
    lenient = await start(make_settings(database_url, password_min_length=8))
    try:
        async with service_channel(lenient.address, JWT_SECRET) as channel:
            await Api(pb_grpc.RegistryServiceStub(channel)).sign_up(email, short)
    finally:
        await lenient.stop(0)
    strict = await start(make_settings(database_url))
    try:
        async with service_channel(strict.address, JWT_SECRET) as channel:
            stub = pb_grpc.RegistryServiceStub(channel)
            await stub.Login(pb.LoginRequest(email=email, password=short))
            refused = await rpc_error(
                stub.RegisterUser(pb.RegisterUserRequest(email="next@example.com", password=short))
            )
            assert violation_fields(refused) == {"password"}
    finally:
        await strict.stop(0)
