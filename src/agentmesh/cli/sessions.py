"""`agentmesh fork PROJECT SESSION AT_SEQ`: forks a session at one of its events into a new
session of the project (docs/sessions.md), through the gateway's gRPC port, signed in like every
command. The new session sees the history up to that event and goes its own way: chat in it with
`agentmesh chat AGENT --session ID`. Only typer and the shared options are imported up front, so
`--help` is quick.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

_COLUMNS = ("id", "forked_from_session_id", "forked_at_seq", "last_seq")


def fork(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    session: Annotated[str, typer.Argument(help="The session to fork.")],
    at_seq: Annotated[
        int, typer.Argument(min=1, help="The last event (its seq) of SESSION the new session sees.")
    ],
    new_id: Annotated[
        str, typer.Option("--as", help="The new session's id (default: generated).", show_default=False)
    ] = "",
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Fork a session at an event into a new session that sees the history up to it."""
    from agentmesh.cli.client import run_signed_in

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns
        from agentmesh.memory.client import MemoryClient

        found = await find_project(connection, project)
        forked = await MemoryClient(connection.channel).fork_session(
            session, project_id=found.id, at_seq=at_seq, new_session_id=new_id, metadata=connection.metadata
        )
        return render_columns(_COLUMNS, [forked], output, one=True)

    run_signed_in(gateway, (email, password, token), work)
