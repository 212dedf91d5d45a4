"""`agentmesh users create`: make a user — or a superuser — directly in the registry's database.

Superusers cannot be made over the public API, so, like Django's `createsuperuser`, this command
works on the database itself, with the registry's own rules (`open_components` → `Accounts`): the
same password hashing and validation, and the schema migrated first, so it also works before the
registry ever ran. The database is the registry's, configured as for `agentmesh serve registry`
(`AGENTMESH_REGISTRY_DATABASE_URL` / `AGENTMESH_DATABASE_URL`), or `--database-url`, or else the
SQLite file that `agentmesh up --data-dir DIR` uses.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape

from agentmesh.cli.client import fail
from agentmesh.registry.app import open_components
from agentmesh.registry.errors import EmailTaken, ValidationFailed
from agentmesh.registry.models import User
from agentmesh.registry.settings import RegistrySettings

users = typer.Typer(help="Manage users.", no_args_is_help=True, add_completion=False)


@dataclass(frozen=True)
class CreatedUser:
    """What `create_user` did: `created` a new user, or `promoted` an existing one to superuser
    (and set its password)."""

    user: User
    outcome: Literal["created", "promoted"]


def registry_settings(*, database_url: str | None = None, data_dir: Path | None = None) -> RegistrySettings:
    """The registry's settings from the environment; `database_url` overrides its database, and
    without one from either, the SQLite file of `agentmesh up --data-dir` is used."""
    settings = RegistrySettings()
    overrides: dict[str, object] = {}
    if database_url:
        overrides["database_url"] = database_url
    elif "database_url" not in settings.model_fields_set and data_dir is not None:
        overrides["database_url"] = f"sqlite+aiosqlite:///{(data_dir / 'registry.db').resolve()}"
    if not settings.jwt_secret.get_secret_value():
        # The registry's wiring insists on a signing secret; creating a user signs and verifies
        # nothing, so a throwaway one is as good as the real one here.
        overrides["jwt_secret"] = SecretStr(secrets.token_urlsafe(48))
    return settings.model_copy(update=overrides)


async def create_user(
    settings: RegistrySettings,
    *,
    email: str,
    password: str,
    first_name: str = "",
    last_name: str = "",
    superuser: bool = False,
) -> CreatedUser:
    """Registers a user in the registry's database. With `superuser`, an existing user of that
    e-mail is made a superuser (reactivated, its password set) instead: idempotent, as the
    superuser bootstrap at start is. Raises ValidationFailed for bad input and EmailTaken when a
    plain user of that e-mail exists."""
    components = await open_components(settings)
    try:
        accounts = components.accounts
        try:
            user = await accounts.register(
                email=email,
                password=password,
                first_name=first_name,
                last_name=last_name,
                is_superuser=superuser,
            )
            return CreatedUser(user, "created")
        except EmailTaken:
            if not superuser:
                raise
        user = await accounts.ensure_superuser(email=email, password=password, reset_password=True)
        return CreatedUser(user, "promoted")
    finally:
        await components.engine.dispose()


@users.command("create")
def create_command(
    email: Annotated[str, typer.Option(help="The user's e-mail address (their sign-in name).")],
    password: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTMESH_PASSWORD",
            show_envvar=True,
            help="The password (at least 8 characters); asked for when missing.",
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
    database_url: Annotated[
        str | None,
        typer.Option(help="The registry's database (default: AGENTMESH_DATABASE_URL, else the data dir's)."),
    ] = None,
    data_dir: Annotated[
        Path, typer.Option(help="Data directory of `agentmesh up`, for its SQLite database.")
    ] = Path(".agentmesh"),
) -> None:
    """Create a user directly in the registry's database (superusers can only be made this way)."""
    if password is None:
        if not sys.stdin.isatty():
            raise fail("no password: pass --password or set AGENTMESH_PASSWORD")
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    settings = registry_settings(database_url=database_url, data_dir=data_dir)
    try:
        created = asyncio.run(
            create_user(
                settings,
                email=email,
                password=password,
                first_name=first_name,
                last_name=last_name,
                superuser=superuser,
            )
        )
    except ValidationFailed as error:
        problems = "; ".join(f"{violation.field} {violation.description}" for violation in error.violations)
        raise fail(f"invalid user: {problems}") from None
    except EmailTaken:
        raise fail(f"a user with e-mail {email} exists already") from None
    user = created.user
    role = "superuser" if user.is_superuser else "user"
    if created.outcome == "created":
        message = f"created {role} {user.email} (id {user.id})"
    else:
        message = f"{user.email} (id {user.id}) is a superuser; its password was set"
    Console().print(escape(message), soft_wrap=True, highlight=False)
