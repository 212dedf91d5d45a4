"""`agentmesh versions PROJECT AGENT`: an agent's versions, newest first, what changed in one
(`--diff N [--against M]`), or the agent rolled back to one (`--restore N`); and `agentmesh move
PROJECT SESSION VERSION|latest`: moves a session to one of them, or with `--all-sessions` every
session of an agent (docs/sessions.md, Agent versions), through the gateway's gRPC port, signed
in like every command. Only typer and the shared options are imported up front, so `--help` is
quick.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

_COLUMNS = ("number", "created_at", "created_by")
_CHANGE_COLUMNS = ("field", "before", "after")
_MOVED_COLUMNS = ("agent_id", "version")
_ALL_MOVED_COLUMNS = ("agent_id", "version", "moved_sessions", "sessions")


def versions(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    agent: Annotated[str, typer.Argument(help="The agent (id, slug or name).")],
    diff: Annotated[
        int | None,
        typer.Option("--diff", min=1, help="Show what changed in this version.", show_default=False),
    ] = None,
    against: Annotated[
        int | None,
        typer.Option(
            "--against",
            min=1,
            help="With --diff: compared to this version (default: the one before).",
            show_default=False,
        ),
    ] = None,
    restore: Annotated[
        int | None,
        typer.Option(
            "--restore",
            min=1,
            help="Roll the agent back to this version (a new version).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000, help="At most this many.")] = 50,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List an agent's versions (every change of it or its type makes one), diff two, or roll back to one.

    Newest first; --diff N shows the fields that differ from the version before (or --against M),
    --restore N sets the agent's config to version N's, as a new version."""
    from agentmesh.cli.client import run_signed_in

    if diff is not None and restore is not None:
        raise typer.BadParameter("give --diff or --restore, not both", param_hint="--restore")
    if against is not None and diff is None:
        raise typer.BadParameter("goes with --diff", param_hint="--against")

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns

        found = await find_project(connection, project)
        registry, metadata = connection.registry, connection.metadata
        if diff is not None:
            changed = await registry.diff_agent_versions(
                found.id, agent, diff, against=against or 0, metadata=metadata
            )
            return render_columns(_CHANGE_COLUMNS, list(changed.changes), output, one=False)
        if restore is not None:
            restored = await registry.restore_agent_version(found.id, agent, restore, metadata=metadata)
            return render_columns(_COLUMNS, [restored.version], output, one=True)
        listed = await registry.list_agent_versions(found.id, agent, page_size=limit, metadata=metadata)
        return render_columns(_COLUMNS, list(listed.versions), output, one=False)

    run_signed_in(gateway, (email, password, token), work)


def move(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    session: Annotated[
        str, typer.Argument(help="The session to move; with --all-sessions, the agent whose sessions move.")
    ],
    version: Annotated[str, typer.Argument(help="A version number of the agent, or latest.")],
    agent: Annotated[
        str,
        typer.Option("--agent", help="The agent (default: the one the session has run).", show_default=False),
    ] = "",
    all_sessions: Annotated[
        bool,
        typer.Option(
            "--all-sessions", help="Move every session that has run the agent named before VERSION."
        ),
    ] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Move a session (or every session of an agent) to a version of it, or to the latest.

    Its next run uses it. With --all-sessions the second argument names the agent, and every
    session that has run it moves: `agentmesh move demo coordinator latest --all-sessions`."""
    from agentmesh.cli.client import run_signed_in

    latest = version == "latest"
    if not latest and not version.isdigit():
        raise typer.BadParameter("a version number or latest", param_hint="VERSION")
    if all_sessions and agent:
        raise typer.BadParameter("with --all-sessions the agent is the second argument", param_hint="--agent")
    number = 0 if latest else int(version)

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns

        found = await find_project(connection, project)
        if all_sessions:
            moved_all = await connection.registry.move_agent_sessions(
                found.id, session, version=number, latest=latest, metadata=connection.metadata
            )
            return render_columns(_ALL_MOVED_COLUMNS, [moved_all], output, one=True)
        moved = await connection.registry.move_session(
            found.id, session, agent_id=agent, version=number, latest=latest, metadata=connection.metadata
        )
        return render_columns(_MOVED_COLUMNS, list(moved.versions), output, one=False)

    run_signed_in(gateway, (email, password, token), work)
