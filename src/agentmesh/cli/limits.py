"""`agentmesh limits PROJECT [NAME=VALUE ...]`: a project's limits (docs/tenants.md), shown, or
changed through the gateway's gRPC port, signed in like every command.

Each `NAME=VALUE` sets one limit (`concurrent_runs=4`; 0 is unlimited) or, with `default`, gives
it back to the operator's default; the limits not named stay as they are. A superuser may set any
value; a project's owner may only lower them (the registry refuses a raise, naming the limit).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption

# The limits as the API names them (DESIGN §12's, then the budgets), in the order they are shown;
# the costs (US dollars) are decimal numbers, the others whole numbers. Written out rather than
# read from the proto, so that `--help` imports no generated code (a test holds them equal).
LIMIT_NAMES = (
    "requests_per_minute",
    "concurrent_runs",
    "open_streams",
    "tokens_per_day",
    "stored_bytes",
    "tokens_per_month",
    "cost_per_day",
    "cost_per_month",
)
COST_LIMITS = ("cost_per_day", "cost_per_month")


def limits(
    project: Annotated[str, typer.Argument(help="The project (slug or id).")],
    settings: Annotated[
        list[str] | None,
        typer.Argument(
            help="NAME=VALUE to set (0: unlimited; `default`: the operator's default). "
            f"Names: {', '.join(LIMIT_NAMES)}."
        ),
    ] = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Show a project's limits, or set them (superusers; owners may only lower them)."""
    from agentmesh.cli.client import fail, run_signed_in

    try:
        changes = parse_settings(settings or [])
    except ValueError as error:
        raise fail(str(error)) from None

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import find_project
        from agentmesh.registry.v1 import resources_pb2

        found = await find_project(connection, project)
        if changes:
            wanted = resources_pb2.ProjectLimits()
            wanted.CopyFrom(found.limits)
            for name, value in changes.items():
                if value is None:
                    wanted.ClearField(name)
                else:
                    setattr(wanted, name, value)
            found = await connection.registry.update_project(
                resources_pb2.Project(id=found.id, limits=wanted), ["limits"], metadata=connection.metadata
            )
        return render(found.slug, found.limits)

    run_signed_in(gateway, (email, password, token), work)


def parse_settings(settings: list[str]) -> dict[str, float | None]:
    """NAME=VALUE words as {name: value}, None for `default`; ValueError naming a bad one."""
    changes: dict[str, float | None] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if name not in LIMIT_NAMES or not equals:
            raise ValueError(f"{setting!r}: expected NAME=VALUE with NAME one of {', '.join(LIMIT_NAMES)}")
        if value == "default":
            changes[name] = None
        elif value.isdigit():
            changes[name] = int(value)
        elif name in COST_LIMITS and _is_amount(value):
            changes[name] = float(value)
        else:
            kind = "an amount in US dollars" if name in COST_LIMITS else "a whole number"
            raise ValueError(f"{setting!r}: the value must be {kind} (0: unlimited) or `default`")
    return changes


def _is_amount(value: str) -> bool:
    whole, dot, cents = value.partition(".")
    return bool(dot) and whole.isdigit() and cents.isdigit()


def render(slug: str, limits: Any) -> str:
    """One line per limit: its value, `unlimited`, or `default` when the project sets none."""
    lines = [f"limits of project {slug}:"]
    for name in LIMIT_NAMES:
        if not limits.HasField(name):
            shown = "default"
        else:
            value = getattr(limits, name)
            shown = "unlimited" if not value else f"${value:g}" if name in COST_LIMITS else str(value)
        lines.append(f"  {name}: {shown}")
    return "\n".join(lines)
