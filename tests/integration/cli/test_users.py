"""`agentmesh users create`: users and superusers made in the running mesh, through the gateway,
by a signed-in superuser — then signing in through the mesh at once. The command runs as its own
process, as a user runs it."""

from __future__ import annotations

import grpc
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import agentmesh
from tests.mesh import SUPERUSER_EMAIL, SUPERUSER_PASSWORD, MeshClient, bearer

PASSWORD = "a-long-password-1"
ADMIN = {"AGENTMESH_EMAIL": SUPERUSER_EMAIL, "AGENTMESH_PASSWORD": SUPERUSER_PASSWORD}


async def users_create(mesh: Mesh, *args: str, env: dict[str, str] = ADMIN) -> tuple[int, str, str]:
    return await agentmesh("users", "create", "--gateway", mesh.gateway.address, *args, env=env)


async def current_user(client: MeshClient, email: str, password: str) -> reg.GetCurrentUserResponse:
    token = await client.login(email, password)
    return await client.registry.GetCurrentUser(reg.GetCurrentUserRequest(), metadata=bearer(token))


async def test_superuser_created_by_the_cli_can_sign_in_and_manage_types(
    mesh: Mesh, client: MeshClient
) -> None:
    email = "ops@example.com"
    code, out, err = await users_create(
        mesh, "--email", email, "--password", PASSWORD, "--superuser", "--first-name", "Ada"
    )
    assert code == 0, err
    assert f"created superuser {email}" in out

    me = (await current_user(client, email, PASSWORD)).user
    assert (me.email, me.first_name, me.is_superuser) == (email, "Ada", True)
    token = await client.login(email, PASSWORD)
    created = await client.registry.CreateAgentType(  # superusers only
        reg.CreateAgentTypeRequest(
            agent_type=resources_pb2.AgentType(name="Ops", slug="ops", primary_model="mock", is_active=True)
        ),
        metadata=bearer(token),
    )
    assert created.agent_type.slug == "ops"


async def test_plain_user_is_not_a_superuser(mesh: Mesh, client: MeshClient) -> None:
    email = "dev@example.com"
    env = {**ADMIN, "AGENTMESH_NEW_USER_PASSWORD": PASSWORD}  # the new user's password, from the environment
    code, out, err = await users_create(mesh, "--email", email, "--last-name", "Lovelace", env=env)
    assert code == 0, err
    assert f"created user {email}" in out

    me = (await current_user(client, email, PASSWORD)).user
    assert (me.last_name, me.is_superuser) == ("Lovelace", False)

    code, _, err = await users_create(mesh, "--email", email, "--password", PASSWORD)
    assert code == 1
    assert f"a user with e-mail {email} exists already" in err


async def test_superuser_of_an_existing_email_promotes_it_and_sets_the_password(
    mesh: Mesh, client: MeshClient
) -> None:
    email = "dev@example.com"
    await users_create(mesh, "--email", email, "--password", PASSWORD)

    code, out, err = await users_create(
        mesh, "--email", email, "--password", "another-password-2", "--superuser"
    )
    assert code == 0, err
    assert "is a superuser; its password was set" in out
    assert (await current_user(client, email, "another-password-2")).user.is_superuser
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.login(email, PASSWORD)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED

    # The bootstrap superuser too: running it again is harmless.
    code, _, err = await users_create(
        mesh, "--email", SUPERUSER_EMAIL, "--password", SUPERUSER_PASSWORD, "--superuser"
    )
    assert code == 0, err
    assert (await current_user(client, SUPERUSER_EMAIL, SUPERUSER_PASSWORD)).user.is_superuser


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [
        ("not-an-email", PASSWORD, "email must be an e-mail address"),
        ("short@example.com", "short", "password must be at least 12 characters"),
    ],
)
async def test_invalid_user_is_refused(
    mesh: Mesh, client: MeshClient, email: str, password: str, message: str
) -> None:
    code, _, err = await users_create(mesh, "--email", email, "--password", password, "--superuser")

    assert code == 1
    assert f"invalid user: {message}" in err
    with pytest.raises(grpc.aio.AioRpcError):
        await client.login(email, password)


async def test_only_a_superuser_may_create_users(mesh: Mesh, client: MeshClient) -> None:
    await client.registry.RegisterUser(reg.RegisterUserRequest(email="member@example.com", password=PASSWORD))
    member = {"AGENTMESH_EMAIL": "member@example.com", "AGENTMESH_PASSWORD": PASSWORD}

    code, _, err = await users_create(
        mesh, "--email", "mallory@example.com", "--password", PASSWORD, "--superuser", env=member
    )

    assert code == 1
    assert "member@example.com is not a superuser" in err
    assert "AGENTMESH_SUPERUSER_EMAIL" in err  # how the first superuser is made
    with pytest.raises(grpc.aio.AioRpcError):
        await client.login("mallory@example.com", PASSWORD)


async def test_without_a_superuser_to_sign_in_as_it_says_how_to_make_the_first(mesh: Mesh) -> None:
    code, _, err = await users_create(mesh, "--email", "x@example.com", "--password", PASSWORD, env={})

    assert code == 1
    assert "creating users takes a superuser" in err
    assert "AGENTMESH_SUPERUSER_EMAIL and AGENTMESH_SUPERUSER_PASSWORD" in err


async def test_without_a_running_mesh_it_says_so() -> None:
    code, _, err = await agentmesh(
        *("users", "create", "--email", "x@example.com", "--password", PASSWORD),
        *("--gateway", "127.0.0.1:1"),
        env=ADMIN,
    )

    assert code == 1
    assert "cannot reach the mesh at 127.0.0.1:1" in err


async def test_missing_password_without_a_terminal_is_an_error() -> None:
    code, _, err = await agentmesh(*("users", "create", "--email", "x@example.com"), env=ADMIN)

    assert code == 1
    assert "no password for the new user" in err
