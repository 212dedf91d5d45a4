"""`agentmesh invitations create | list | revoke`: invitations to register, for a mesh whose
registry takes registrations by invitation only (`AGENTMESH_REGISTRY_REGISTRATION_MODE=invite-only`),
through the gateway's gRPC port, signed in as a superuser. `create` prints the token once; the
person invited registers with it (`invitation_token` of `POST /api/v1/auth/register`). Only the
options module is imported up front, so `--help` is quick."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

invitations = typer.Typer(
    help="Issue, list and revoke invitations to register (superusers).",
    no_args_is_help=True,
    add_completion=False,
)

COLUMNS = ("id", "created_by", "created_at", "expires_at", "used_at", "revoked_at")


@invitations.command("create")
def create(
    expires_in_hours: Annotated[
        int | None,
        typer.Option("--expires-in-hours", min=1, max=90 * 24, help="Valid this long (default: 7 days)."),
    ] = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Issue a single-use invitation and print its token (the only time it is shown)."""

    async def work(connection: Any) -> str | None:
        ttl_seconds = expires_in_hours * 3600 if expires_in_hours else 0
        created = await connection.registry.create_invitation(
            ttl_seconds=ttl_seconds, metadata=connection.metadata
        )
        typer.echo(
            f"invitation {created.invitation.id} created; pass the token on now, it is not shown again:",
            err=True,
        )
        return str(created.token)

    from agentmesh.cli.client import run_signed_in

    run_signed_in(gateway, (email, password, token), work)


@invitations.command("list")
def list_command(
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List invitations, used, revoked and expired ones included (never their tokens)."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import render_columns

        found = await connection.registry.list_invitations(metadata=connection.metadata)
        if output is Output.table and not found:
            return "no invitations"
        return render_columns(COLUMNS, found, output, one=False)

    from agentmesh.cli.client import run_signed_in

    run_signed_in(gateway, (email, password, token), work)


@invitations.command("revoke")
def revoke(
    invitation_id: Annotated[str, typer.Argument(help="The invitation's id, as listed.")],
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Revoke an unused invitation: nobody can register with it any more."""

    async def work(connection: Any) -> str | None:
        await connection.registry.revoke_invitation(invitation_id, metadata=connection.metadata)
        return f"invitation {invitation_id} revoked"

    from agentmesh.cli.client import run_signed_in

    run_signed_in(gateway, (email, password, token), work)
