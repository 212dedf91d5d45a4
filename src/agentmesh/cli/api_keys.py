"""`agentmesh api-keys create | list | revoke`: the signed-in user's API keys, through the gateway's
gRPC port. A key is what programs sign in with (`Authorization: Bearer amk_…`, the OpenAI
client's `api_key`, or `AGENTMESH_API_KEY` for this CLI); `create` prints it once and it is never
shown again. Only the options module is imported up front, so `--help` is quick."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

api_keys = typer.Typer(help="Manage your API keys.", no_args_is_help=True, add_completion=False)

COLUMNS = ("id", "name", "prefix", "project_id", "created_at", "expires_at", "revoked_at")


def _run(
    credentials: tuple[str | None, str | None, str | None],
    gateway: str | None,
    work: Callable[[Any], Awaitable[str | None]],
) -> None:
    """Signs in, runs `work(connection)` and prints what it returns; one clear line on failure."""
    from agentmesh.cli.client import run_signed_in

    run_signed_in(gateway, credentials, work)


@api_keys.command("create")
def create(
    name: Annotated[str, typer.Argument(help="What the key is for, e.g. 'ci' or 'notebook'.")],
    project: Annotated[
        str | None, typer.Option("--project", "-p", help="Scope the key to this project (slug or id).")
    ] = None,
    expires_in_days: Annotated[
        int | None, typer.Option("--expires-in-days", min=1, help="Stop working after this many days.")
    ] = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Create an API key and print it (the only time it is shown)."""

    async def work(connection: Any) -> str | None:
        from datetime import UTC, datetime, timedelta

        from agentmesh.cli.resources import project_id_of

        project_id = await project_id_of(connection, project) if project else ""
        expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None
        created = await connection.registry.create_api_key(
            name, project_id=project_id, expires_at=expires_at, metadata=connection.metadata
        )
        typer.echo(
            f"API key {created.api_key.id} ({name}) created; store it now, it is not shown again:", err=True
        )
        return str(created.secret)

    _run((email, password, token), gateway, work)


@api_keys.command("list")
def list_command(
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List your API keys (never their secrets)."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import render_columns

        keys = await connection.registry.list_api_keys(metadata=connection.metadata)
        if output is Output.table and not keys:
            return "no API keys"
        return render_columns(COLUMNS, keys, output, one=False)

    _run((email, password, token), gateway, work)


@api_keys.command("revoke")
def revoke(
    key: Annotated[str, typer.Argument(help="The key's id, or its 12-character prefix.")],
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Revoke one of your API keys; it stops working within a second."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.client import CliError

        keys = await connection.registry.list_api_keys(metadata=connection.metadata)
        matches = [k for k in keys if key in (k.id, k.prefix)]
        if len(matches) != 1:
            problem = "no API key of yours" if not matches else "more than one API key"
            raise CliError(f"{problem} has the id or prefix {key!r}: see `agentmesh api-keys list`")
        await connection.registry.revoke_api_key(matches[0].id, metadata=connection.metadata)
        return f"API key {matches[0].id} ({matches[0].name}) revoked"

    _run((email, password, token), gateway, work)
