"""`agentmesh users create`: users and superusers made in the registry's database while the mesh
runs, then signing in through the mesh."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from agentmesh.cli.main import app
from agentmesh.cli.mesh import Mesh
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.cli.support import invoke
from tests.mesh import SUPERUSER_EMAIL, MeshClient, bearer

PASSWORD = "a-long-password-1"


def users_create(database_url: str, *args: str) -> list[str]:
    return ["users", "create", "--database-url", database_url, *args]


async def current_user(client: MeshClient, email: str, password: str) -> reg.GetCurrentUserResponse:
    token = await client.login(email, password)
    return await client.registry.GetCurrentUser(reg.GetCurrentUserRequest(), metadata=bearer(token))


async def test_superuser_created_by_the_cli_can_sign_in_and_manage_types(
    mesh: Mesh, client: MeshClient, database_url: str
) -> None:
    email = "ops@example.com"
    result = await invoke(
        app,
        users_create(
            database_url, "--email", email, "--password", PASSWORD, "--superuser", "--first-name", "Ada"
        ),
    )
    assert result.exit_code == 0, result.output
    assert f"created superuser {email}" in result.stdout

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


async def test_plain_user_is_not_a_superuser(mesh: Mesh, client: MeshClient, database_url: str) -> None:
    email = "dev@example.com"
    result = await invoke(
        app, users_create(database_url, "--email", email, "--password", PASSWORD, "--last-name", "Lovelace")
    )
    assert result.exit_code == 0, result.output
    assert f"created user {email}" in result.stdout

    me = (await current_user(client, email, PASSWORD)).user
    assert (me.last_name, me.is_superuser) == ("Lovelace", False)

    again = await invoke(app, users_create(database_url, "--email", email, "--password", PASSWORD))
    assert again.exit_code == 1
    assert f"a user with e-mail {email} exists already" in again.stderr


async def test_superuser_of_an_existing_email_promotes_it_and_sets_the_password(
    mesh: Mesh, client: MeshClient, database_url: str
) -> None:
    email = "dev@example.com"
    await invoke(app, users_create(database_url, "--email", email, "--password", PASSWORD))

    result = await invoke(
        app, users_create(database_url, "--email", email, "--password", "another-password-2", "--superuser")
    )
    assert result.exit_code == 0, result.output
    assert "is a superuser; its password was set" in result.stdout
    assert (await current_user(client, email, "another-password-2")).user.is_superuser
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.login(email, PASSWORD)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED

    # The bootstrap superuser too: running it again is harmless.
    result = await invoke(
        app, users_create(database_url, "--email", SUPERUSER_EMAIL, "--password", PASSWORD, "--superuser")
    )
    assert result.exit_code == 0, result.output
    assert (await current_user(client, SUPERUSER_EMAIL, PASSWORD)).user.is_superuser


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [
        ("not-an-email", PASSWORD, "email must be an e-mail address"),
        ("short@example.com", "short", "password must be at least 8 characters"),
    ],
)
async def test_invalid_user_is_refused(
    mesh: Mesh, client: MeshClient, database_url: str, email: str, password: str, message: str
) -> None:
    result = await invoke(
        app, users_create(database_url, "--email", email, "--password", password, "--superuser")
    )

    assert result.exit_code == 1
    assert message in result.stderr
    with pytest.raises(grpc.aio.AioRpcError):
        await client.login(email, password)


async def test_missing_password_without_a_terminal_is_an_error(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}"
    result = await invoke(
        app, users_create(database_url, "--email", "x@example.com"), env={"AGENTMESH_PASSWORD": None}
    )

    assert result.exit_code == 1
    assert "no password" in result.stderr
