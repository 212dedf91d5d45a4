"""`agentmesh versions PROJECT AGENT`: an agent's versions, newest first, and `agentmesh move
PROJECT SESSION VERSION|latest`: moves a session to one of them (docs/sessions.md, Agent
versions), through the gateway's gRPC port, signed in like every command. Only typer and the
shared options are imported up front, so `--help` is quick.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

_COLUMNS = ("number", "created_at", "created_by")
_MOVED_COLUMNS = ("agent_id", "version")


def versions(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    agent: Annotated[str, typer.Argument(help="The agent (id, slug or name).")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000, help="At most this many.")] = 50,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List an agent's versions, newest first: every change of it or its type makes one."""
    from agentmesh.cli.client import run_signed_in

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns

        found = await find_project(connection, project)
        listed = await connection.registry.list_agent_versions(
            found.id, agent, page_size=limit, metadata=connection.metadata
        )
        return render_columns(_COLUMNS, list(listed.versions), output, one=False)

    run_signed_in(gateway, (email, password, token), work)


def move(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    session: Annotated[str, typer.Argument(help="The session to move.")],
    version: Annotated[str, typer.Argument(help="A version number of the agent, or latest.")],
    agent: Annotated[
        str,
        typer.Option("--agent", help="The agent (default: the one the session has run).", show_default=False),
    ] = "",
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Move a session to a version of its agent (or to the latest): its next run uses it."""
    from agentmesh.cli.client import run_signed_in

    latest = version == "latest"
    if not latest and not version.isdigit():
        raise typer.BadParameter("a version number or latest", param_hint="VERSION")

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns

        found = await find_project(connection, project)
        moved = await connection.registry.move_session(
            found.id,
            session,
            agent_id=agent,
            version=0 if latest else int(version),
            latest=latest,
            metadata=connection.metadata,
        )
        return render_columns(_MOVED_COLUMNS, list(moved.versions), output, one=False)

    run_signed_in(gateway, (email, password, token), work)
