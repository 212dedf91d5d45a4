"""`agentmesh usage PROJECT`: a project's spending from the cost ledger (docs/usage.md), summed per
group of `--by` (agent, user, model, session, day; several allowed), over `--from`/`--to` UTC days,
through the gateway's gRPC port, signed in like every command. A cost that is unknown (a model
called has no price) shows as "unknown", never as 0."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output


class Dimension(StrEnum):
    """What `usage` groups by."""

    agent = "agent"
    user = "user"
    model = "model"
    session = "session"
    day = "day"


_KEYS = {
    Dimension.agent: "agent",
    Dimension.user: "user_id",
    Dimension.model: "model",
    Dimension.session: "session_id",
    Dimension.day: "day",
}


def usage(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    by: Annotated[
        list[Dimension] | None,
        typer.Option("--by", "-b", help="Group by agent, user, model, session or day."),
    ] = None,
    start_day: Annotated[str, typer.Option("--from", help="First UTC day counted (YYYY-MM-DD).")] = "",
    end_day: Annotated[str, typer.Option("--to", help="Last UTC day counted (YYYY-MM-DD).")] = "",
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Show what a project spent: tokens and cost per agent, user, model, session or day."""
    from agentmesh.cli.client import run_signed_in

    dimensions = list(dict.fromkeys(by or []))

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project, render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg

        found = await find_project(connection, project)
        summary = await connection.registry.summarize_usage(
            found.id,
            [reg.UsageDimension.Value(f"USAGE_DIMENSION_{d.value.upper()}") for d in dimensions],
            start_day=start_day,
            end_day=end_day,
            metadata=connection.metadata,
        )
        if output is not Output.table:
            return render_columns((), [summary], output, one=True)
        _print_summary(summary, dimensions)
        return None

    run_signed_in(gateway, (email, password, token), work)


def _print_summary(summary: Any, dimensions: list[Dimension]) -> None:
    from agentmesh.cli.output import print_table, stdout_console

    columns = [d.value for d in dimensions] + ["runs", "calls", "input", "output", "cached", "cost (USD)"]
    rows = [_row(group, dimensions) for group in summary.groups]
    if dimensions:
        rows.append(["total", *[""] * (len(dimensions) - 1), *_row(summary.total, [])])
    else:
        rows = [_row(summary.total, [])]
    print_table(stdout_console(), columns, rows)
    if summary.truncated:
        stdout_console().print("(more than 1000 groups: narrow the days or group by less)")


def _row(group: Any, dimensions: list[Dimension]) -> list[str]:
    usage = group.usage
    cost = f"{usage.cost:.6f}" if usage.cost_known else f"unknown (priced: {usage.cost:.6f})"
    keys = [str(getattr(group, _KEYS[d])) or "-" for d in dimensions]
    counts = [group.runs, group.calls, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens]
    return keys + [str(count) for count in counts] + [cost]
