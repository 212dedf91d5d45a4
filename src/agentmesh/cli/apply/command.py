"""The `agentmesh apply` command: load the file, then plan and execute against a running mesh.

Only typer and the shared options are imported up front, so `agentmesh apply --help` is quick: the
file's format and the planning import the registry's declarations, gRPC and pydantic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agentmesh.cli.options import (
    EmailOption,
    GatewayOption,
    PasswordOption,
    RegistryAliasOption,
    TokenOption,
    gateway_address,
)

if TYPE_CHECKING:
    from agentmesh.cli.apply.document import Manifest
    from agentmesh.cli.apply.plan import Change
    from agentmesh.cli.client import Credentials


def apply_command(
    file: Annotated[
        str, typer.Option("--file", "-f", help="The YAML file to apply; '-' reads standard input.")
    ],
    gateway: GatewayOption = None,
    registry: RegistryAliasOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change, change nothing.")
    ] = False,
    recreate_terminated: Annotated[
        bool,
        typer.Option(
            "--recreate-terminated",
            help="Create declared agents that were terminated again, with the same name and config.",
        ),
    ] = False,
) -> None:
    """Create or update the agent types, projects and agents declared in FILE (idempotent).

    Types and projects are found by slug, agents by name; see docs/apply.md for the format.
    """
    from rich.markup import escape

    from agentmesh.cli.apply.document import ApplyError, read_manifest
    from agentmesh.cli.apply.render import render_changes, render_problems, render_versions, render_warnings
    from agentmesh.cli.client import CliError, Credentials, fail
    from agentmesh.cli.output import stderr_console, stdout_console
    from agentmesh.cli.spinner import run_waiting

    out, err = stdout_console(), stderr_console()
    address = gateway_address(gateway, registry)
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
        changes = run_waiting(
            _apply(manifest, address, credentials, dry_run=dry_run, recreate_terminated=recreate_terminated)
        )
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
    render_versions(out, changes)
    render_warnings(err, changes)


async def _apply(
    manifest: Manifest, address: str, credentials: Credentials, *, dry_run: bool, recreate_terminated: bool
) -> list[Change]:
    from agentmesh.cli.apply.execute import apply_manifest
    from agentmesh.cli.client import CliError, connect, describe
    from agentmesh.runtime.errors import DomainError

    async with connect(address, credentials) as connection:
        try:
            return await apply_manifest(
                manifest,
                connection.registry,
                metadata=connection.metadata,
                dry_run=dry_run,
                recreate_terminated=recreate_terminated,
            )
        except DomainError as error:  # a read while planning
            raise CliError(f"{address}: {describe(error)}") from None
