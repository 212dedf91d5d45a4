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

# The names of DESIGN §12, in the order they are shown.
LIMIT_NAMES = ("requests_per_minute", "concurrent_runs", "open_streams", "tokens_per_day", "stored_bytes")


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
    from agentmesh.cli.client import CliError, run_signed_in

    try:
        changes = parse_settings(settings or [])
    except ValueError as error:
        raise CliError(str(error)) from None

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


def parse_settings(settings: list[str]) -> dict[str, int | None]:
    """NAME=VALUE words as {name: value}, None for `default`; ValueError naming a bad one."""
    changes: dict[str, int | None] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if name not in LIMIT_NAMES or not equals:
            raise ValueError(f"{setting!r}: expected NAME=VALUE with NAME one of {', '.join(LIMIT_NAMES)}")
        if value == "default":
            changes[name] = None
        elif value.isdigit():
            changes[name] = int(value)
        else:
            raise ValueError(f"{setting!r}: the value must be a whole number (0: unlimited) or `default`")
    return changes


def render(slug: str, limits: Any) -> str:
    """One line per limit: its value, `unlimited`, or `default` when the project sets none."""
    lines = [f"limits of project {slug}:"]
    for name in LIMIT_NAMES:
        if not limits.HasField(name):
            shown = "default"
        else:
            value = getattr(limits, name)
            shown = str(value) if value else "unlimited"
        lines.append(f"  {name}: {shown}")
    return "\n".join(lines)
