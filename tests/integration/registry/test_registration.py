"""Registration modes and invitations through the registry's RegistryService, on both databases:
`closed` refuses everyone (superusers still create users), `invite-only` takes a single-use
invitation a superuser issued, once; used, revoked and unknown ones are refused alike."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from agentmesh.registry.app import start
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.registry.v1 import registry_service_pb2_grpc as pb_grpc
from tests.bearer import service_channel
from tests.integration.registry.support import (
    JWT_SECRET,
    PASSWORD,
    SUPERUSER_EMAIL,
    SUPERUSER_PASSWORD,
    Api,
    make_settings,
    rpc_error,
)

GRPC = grpc.StatusCode


@pytest.fixture
async def registry_in(database_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    service = await start(make_settings(database_url, registration_mode=request.param))
    try:
        async with service_channel(service.address, JWT_SECRET) as channel:
            yield Api(pb_grpc.RegistryServiceStub(channel))
    finally:
        await service.stop(0)


@pytest.mark.parametrize("registry_in", ["closed"], indirect=True)
async def test_closed_registration_refuses_everyone_but_superusers_create_users(registry_in: Api) -> None:
    api = registry_in
    refused = await rpc_error(
        api.stub.RegisterUser(pb.RegisterUserRequest(email="a@example.com", password=PASSWORD))
    )
    assert (refused.code, refused.reason) == (GRPC.PERMISSION_DENIED, "REGISTRATION_CLOSED")
    root = await api.root()
    await api.stub.CreateUser(
        pb.CreateUserRequest(email="a@example.com", password=PASSWORD), metadata=root.metadata
    )
    await api.stub.Login(pb.LoginRequest(email="a@example.com", password=PASSWORD))


@pytest.mark.parametrize("registry_in", ["invite-only"], indirect=True)
async def test_an_invitation_registers_once_and_revoked_or_unknown_ones_never(registry_in: Api) -> None:
    api = registry_in
    root = await api.root()

    def register(email: str, token: str) -> pb.RegisterUserRequest:
        return pb.RegisterUserRequest(email=email, password=PASSWORD, invitation_token=token)

    for token in ("", "ami_" + "x" * 43):
        refused = await rpc_error(api.stub.RegisterUser(register("a@example.com", token)))
        assert (refused.code, refused.reason) == (GRPC.PERMISSION_DENIED, "INVITATION_INVALID")

    first = await api.stub.CreateInvitation(pb.CreateInvitationRequest(), metadata=root.metadata)
    second = await api.stub.CreateInvitation(
        pb.CreateInvitationRequest(ttl_seconds=3600), metadata=root.metadata
    )
    assert first.token.startswith("ami_") and len(first.token) == 47
    assert second.invitation.expires_at.seconds - second.invitation.created_at.seconds == 3600

    user = (await api.stub.RegisterUser(register("a@example.com", first.token))).user
    assert user.email == "a@example.com"
    await api.stub.Login(pb.LoginRequest(email="a@example.com", password=PASSWORD))
    reused = await rpc_error(api.stub.RegisterUser(register("b@example.com", first.token)))
    assert reused.reason == "INVITATION_INVALID"

    await api.stub.RevokeInvitation(
        pb.RevokeInvitationRequest(id=second.invitation.id), metadata=root.metadata
    )
    revoked = await rpc_error(api.stub.RegisterUser(register("b@example.com", second.token)))
    assert revoked.reason == "INVITATION_INVALID"

    listed = await api.stub.ListInvitations(pb.ListInvitationsRequest(), metadata=root.metadata)
    assert [(i.id, i.HasField("used_at"), i.HasField("revoked_at")) for i in listed.invitations] == [
        (first.invitation.id, True, False),
        (second.invitation.id, False, True),
    ]
    assert first.token not in str(listed)

    # Only superusers manage invitations.
    member = await api.stub.Login(pb.LoginRequest(email="a@example.com", password=PASSWORD))
    for call in (
        api.stub.CreateInvitation(pb.CreateInvitationRequest(), metadata=_bearer(member)),
        api.stub.ListInvitations(pb.ListInvitationsRequest(), metadata=_bearer(member)),
        api.stub.RevokeInvitation(
            pb.RevokeInvitationRequest(id=second.invitation.id), metadata=_bearer(member)
        ),
    ):
        assert (await rpc_error(call)).code == GRPC.PERMISSION_DENIED
    unknown = await rpc_error(
        api.stub.RevokeInvitation(pb.RevokeInvitationRequest(id="no-such-id"), metadata=root.metadata)
    )
    assert (unknown.code, unknown.reason) == (GRPC.NOT_FOUND, "INVITATION_NOT_FOUND")


@pytest.mark.parametrize("registry_in", ["invite-only"], indirect=True)
async def test_an_invitation_with_a_taken_email_is_used_up_and_confirms_nothing(registry_in: Api) -> None:
    api = registry_in
    root = await api.root()
    invitation = await api.stub.CreateInvitation(pb.CreateInvitationRequest(), metadata=root.metadata)
    taken = await api.stub.RegisterUser(
        pb.RegisterUserRequest(
            email=root.user.email, password="a new password 3", invitation_token=invitation.token
        )
    )
    assert taken.user.email == root.user.email and taken.user.id != root.user.id
    again = await rpc_error(
        api.stub.RegisterUser(
            pb.RegisterUserRequest(
                email="c@example.com", password=PASSWORD, invitation_token=invitation.token
            )
        )
    )
    assert again.reason == "INVITATION_INVALID"
    # The superuser's own password is untouched.
    await api.stub.Login(pb.LoginRequest(email=SUPERUSER_EMAIL, password=SUPERUSER_PASSWORD))


def _bearer(login: pb.LoginResponse) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {login.tokens.access_token}"),)
