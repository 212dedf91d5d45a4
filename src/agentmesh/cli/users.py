"""`agentmesh users create`: make a user — or a superuser — in the mesh that is running, through
the registry's `CreateUser` RPC through the gateway, signed in as a superuser.

The registry applies its own rules (validation, argon2id hashing), and the user can sign in at
once. The very first superuser cannot be made this way — nobody could sign in to make it: `agentmesh up`
makes one on a mesh with no user, or the registry creates it at start from
`AGENTMESH_SUPERUSER_EMAIL` / `AGENTMESH_SUPERUSER_PASSWORD`; the errors here say so.

Two people appear on one command line, so their options differ: `--email` / `--password` are the
new user's; the superuser signs in with `--admin-email` / `--admin-password` (or `--token`), read
from `AGENTMESH_EMAIL` / `AGENTMESH_PASSWORD` (`AGENTMESH_TOKEN`) like every other command's
sign-in. Only the options module is imported up front, so `agentmesh users --help` is quick.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from agentmesh.cli.options import GatewayOption, RegistryAliasOption, TokenOption, gateway_address
from agentmesh.cli.spinner import run_waiting

if TYPE_CHECKING:
    from agentmesh.cli.client import Credentials

users = typer.Typer(help="Manage users.", no_args_is_help=True, add_completion=False)

FIRST_SUPERUSER = (
    "the first superuser is made at start: by `agentmesh up` on a mesh with no user (it shows the "
    "password and signs this machine's CLI in), or from AGENTMESH_SUPERUSER_EMAIL and "
    "AGENTMESH_SUPERUSER_PASSWORD set before `agentmesh up` or the registry's container starts"
)


@users.command("create")
def create_command(
    email: Annotated[str, typer.Option(help="The new user's e-mail address (their sign-in name).")],
    password: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTMESH_NEW_USER_PASSWORD",
            show_envvar=True,
            help="The new user's password (12 characters or more, not a common one); asked for when missing.",
        ),
    ] = None,
    first_name: Annotated[str, typer.Option(help="Given name.")] = "",
    last_name: Annotated[str, typer.Option(help="Family name.")] = "",
    superuser: Annotated[
        bool,
        typer.Option(
            "--superuser", help="Make a superuser; an existing user is promoted and gets this password."
        ),
    ] = False,
    gateway: GatewayOption = None,
    registry: RegistryAliasOption = None,
    admin_email: Annotated[
        str | None,
        typer.Option(envvar="AGENTMESH_EMAIL", show_envvar=True, help="Sign in as this superuser."),
    ] = None,
    admin_password: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTMESH_PASSWORD",
            show_envvar=True,
            help="The superuser's password (prefer the environment variable; asked for when missing).",
        ),
    ] = None,
    token: TokenOption = None,
) -> None:
    """Create a user in the running mesh, signed in as a superuser."""

    from agentmesh.cli.client import CliError, Credentials, fail

    address = gateway_address(gateway, registry)
    if not (token or admin_email):
        raise fail(
            "creating users takes a superuser: sign in with --admin-email and --admin-password "
            "(AGENTMESH_EMAIL / AGENTMESH_PASSWORD) or --token (AGENTMESH_TOKEN); " + FIRST_SUPERUSER
        )
    if password is None:
        if not sys.stdin.isatty():
            raise fail("no password for the new user: pass --password or set AGENTMESH_NEW_USER_PASSWORD")
        password = typer.prompt(f"password for {email}", hide_input=True, confirmation_prompt=True)
    try:
        credentials = Credentials.from_options(email=admin_email, password=admin_password, token=token)
        message = run_waiting(
            _create(
                address,
                credentials,
                email=email,
                password=password,
                first_name=first_name,
                last_name=last_name,
                superuser=superuser,
            )
        )
    except CliError as error:
        raise fail(str(error)) from None
    from rich.markup import escape

    from agentmesh.cli.output import stdout_console

    stdout_console().print(escape(message), soft_wrap=True, highlight=False)


async def _create(
    address: str,
    credentials: Credentials,
    *,
    email: str,
    password: str,
    first_name: str,
    last_name: str,
    superuser: bool,
) -> str:
    """Creates the user; returns what to print. CliError says why it could not."""
    from agentmesh.cli.client import CliError, connect, describe
    from agentmesh.runtime.errors import AlreadyExists, DomainError, InvalidArgument, PermissionDenied

    async with connect(address, credentials) as connection:
        try:
            created = await connection.registry.create_user(
                email,
                password,
                first_name=first_name,
                last_name=last_name,
                is_superuser=superuser,
                metadata=connection.metadata,
            )
        except InvalidArgument as error:
            problems = "; ".join(
                f"{violation.field} {violation.description}" for violation in error.violations
            )
            raise CliError(f"invalid user: {problems or error.message}") from None
        except AlreadyExists:
            raise CliError(f"a user with e-mail {email} exists already") from None
        except PermissionDenied:
            who = credentials.email or "the token's user"
            raise CliError(
                f"{who} is not a superuser; only superusers create users ({FIRST_SUPERUSER})"
            ) from None
        except DomainError as error:
            raise CliError(f"{address}: {describe(error)}") from None
    user = created.user
    if created.promoted:
        return f"{user.email} (id {user.id}) is a superuser; its password was set"
    return f"created {'superuser' if user.is_superuser else 'user'} {user.email} (id {user.id})"
