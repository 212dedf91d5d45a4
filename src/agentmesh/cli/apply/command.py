"""The `agentmesh apply` command: load the file, then plan and execute against a running mesh."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from agentmesh.cli.apply.document import ApplyError, Manifest, read_manifest
from agentmesh.cli.apply.execute import apply_manifest
from agentmesh.cli.apply.plan import Change
from agentmesh.cli.apply.render import render_changes, render_problems, render_warnings
from agentmesh.cli.client import (
    CliError,
    Credentials,
    address_of,
    connect,
    describe,
    fail,
)
from agentmesh.cli.options import EmailOption, PasswordOption, RegistryOption, TokenOption
from agentmesh.cli.spinner import run_waiting
from agentmesh.runtime.errors import DomainError


def apply_command(
    file: Annotated[
        str, typer.Option("--file", "-f", help="The YAML file to apply; '-' reads standard input.")
    ],
    registry: RegistryOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change, change nothing.")
    ] = False,
) -> None:
    """Create or update the agent types, projects and agents declared in FILE (idempotent).

    Types and projects are found by slug, agents by name; see docs/apply.md for the format.
    """
    out, err = Console(), Console(stderr=True)
    source = "standard input" if file == "-" else file
    try:
        manifest = read_manifest(file)
    except OSError as error:
        raise fail(f"cannot read {source}: {error.strerror or error}") from None
    except ApplyError as error:
        render_problems(err, f"{source} is not a valid apply file; nothing was applied", error.problems)
        raise typer.Exit(1) from None
    if manifest.is_empty:
        out.print(f"{escape(source)} declares nothing; nothing to apply", soft_wrap=True)
        return
    try:
        credentials = Credentials.from_options(email=email, password=password, token=token)
        changes = run_waiting(_apply(manifest, address_of(registry), credentials, dry_run=dry_run))
    except CliError as error:
        raise fail(str(error)) from None
    except ApplyError as error:
        if error.applied:
            render_changes(out, error.applied)
            render_warnings(err, error.applied)
            render_problems(err, "applying stopped; the objects above were applied", error.problems)
        else:
            render_problems(err, "nothing was applied", error.problems)
        raise typer.Exit(1) from None
    render_changes(out, changes, dry_run=dry_run)
    render_warnings(err, changes)


async def _apply(
    manifest: Manifest, address: str, credentials: Credentials, *, dry_run: bool
) -> list[Change]:
    async with connect(address, credentials) as connection:
        try:
            return await apply_manifest(
                manifest, connection.registry, metadata=connection.metadata, dry_run=dry_run
            )
        except DomainError as error:  # a read while planning
            raise CliError(f"{address}: {describe(error)}") from None
