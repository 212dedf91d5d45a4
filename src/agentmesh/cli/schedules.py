"""`agentmesh schedules list | create | delete | run | history`: a project's schedules (an agent
run on a cron expression, as its creator) through the gateway's gRPC port. Only the options
module is imported up front, so `--help` is quick."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

schedules = typer.Typer(
    help="List, create, delete and run a project's schedules (agents run on a cron), and their history.",
    no_args_is_help=True,
    add_completion=False,
)

COLUMNS = ("name", "agent", "cron", "time_zone", "enabled", "next_fire_at", "overlap_policy", "id")
FIRING_COLUMNS = ("due_at", "outcome", "run_id", "session_id", "error")
ProjectOption = Annotated[str, typer.Option("--project", "-p", help="The project (slug or id).")]
OutputOption = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")]


def _run(
    credentials: tuple[str | None, str | None, str | None],
    gateway: str | None,
    work: Callable[[Any], Awaitable[str | None]],
) -> None:
    from agentmesh.cli.client import run_signed_in

    run_signed_in(gateway, credentials, work)


async def _schedule_named(connection: Any, project_id: str, name: str) -> Any:
    """The project's schedule of that name or id."""
    from agentmesh.cli.client import CliError
    from agentmesh.registry.v1 import registry_service_pb2 as reg
    from agentmesh.runtime.client import unary

    token = ""
    while True:
        request = reg.ListSchedulesRequest(project_id=project_id, page_size=1000, page_token=token)
        page = await unary(connection.registry.stub.ListSchedules, request, metadata=connection.metadata)
        for schedule in page.schedules:
            if name in (schedule.name, schedule.id):
                return schedule
        token = page.next_page_token
        if not token:
            raise CliError(f"no schedule {name!r} in this project: see `agentmesh schedules list`")


@schedules.command("list")
def list_command(
    project: ProjectOption,
    output: OutputOption = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List a project's schedules, with when each fires next."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of, render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.runtime.client import unary

        request = reg.ListSchedulesRequest(
            project_id=await project_id_of(connection, project), page_size=1000
        )
        found = await unary(connection.registry.stub.ListSchedules, request, metadata=connection.metadata)
        if output is Output.table and not found.schedules:
            return "no schedules"
        return render_columns(COLUMNS, list(found.schedules), output, one=False)

    _run((email, password, token), gateway, work)


@schedules.command("create")
def create(
    name: Annotated[str, typer.Argument(help="A DNS label, unique in the project.")],
    project: ProjectOption,
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent to run (its slug).")],
    cron: Annotated[str, typer.Option(help="Five fields: minute hour day-of-month month day-of-week.")],
    message: Annotated[
        str,
        typer.Option("--message", "-m", help="What each firing sends; {{scheduled_for}}, {{now}} filled in."),
    ],
    time_zone: Annotated[str, typer.Option("--time-zone", "--tz", help="IANA time zone.")] = "UTC",
    session_policy: Annotated[str, typer.Option(help="new (a session per firing) or continue.")] = "new",
    missed_policy: Annotated[str, typer.Option(help="skip or run_once (after downtime).")] = "skip",
    overlap_policy: Annotated[str, typer.Option(help="skip, queue or cancel_previous.")] = "skip",
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it disabled.")] = False,
    output: OutputOption = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Create a schedule: the agent runs at each due time, as you."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of, render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.registry.v1 import resources_pb2
        from agentmesh.runtime.client import unary

        schedule = resources_pb2.Schedule(
            project_id=await project_id_of(connection, project),
            name=name,
            agent=agent,
            message=message,
            cron=cron,
            time_zone=time_zone,
            session_policy=session_policy,
            missed_policy=missed_policy,
            overlap_policy=overlap_policy,
            enabled=not disabled,
        )
        request = reg.CreateScheduleRequest(schedule=schedule)
        created = await unary(connection.registry.stub.CreateSchedule, request, metadata=connection.metadata)
        return render_columns(COLUMNS, [created.schedule], output, one=True)

    _run((email, password, token), gateway, work)


@schedules.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="The schedule's name or id.")],
    project: ProjectOption,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Delete a schedule and its history (a run it started goes on)."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.runtime.client import unary

        project_id = await project_id_of(connection, project)
        schedule = await _schedule_named(connection, project_id, name)
        request = reg.DeleteScheduleRequest(project_id=project_id, id=schedule.id)
        await unary(connection.registry.stub.DeleteSchedule, request, metadata=connection.metadata)
        return f"schedule {schedule.name} deleted"

    _run((email, password, token), gateway, work)


@schedules.command("run")
def run_now(
    name: Annotated[str, typer.Argument(help="The schedule's name or id.")],
    project: ProjectOption,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Make a schedule due now: a gateway fires it within a second or so."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.runtime.client import unary

        project_id = await project_id_of(connection, project)
        schedule = await _schedule_named(connection, project_id, name)
        request = reg.RunScheduleRequest(project_id=project_id, id=schedule.id)
        await unary(connection.registry.stub.RunSchedule, request, metadata=connection.metadata)
        return f"schedule {schedule.name} is due now: see `agentmesh schedules history {schedule.name}`"

    _run((email, password, token), gateway, work)


@schedules.command("history")
def history(
    name: Annotated[str, typer.Argument(help="The schedule's name or id.")],
    project: ProjectOption,
    output: OutputOption = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """A schedule's firings, newest first: due time, outcome, run and session."""

    async def work(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of, render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.runtime.client import unary

        project_id = await project_id_of(connection, project)
        schedule = await _schedule_named(connection, project_id, name)
        request = reg.ListScheduleFiringsRequest(
            project_id=project_id, schedule_id=schedule.id, page_size=100
        )
        found = await unary(
            connection.registry.stub.ListScheduleFirings, request, metadata=connection.metadata
        )
        if output is Output.table and not found.firings:
            return f"schedule {schedule.name} has not fired yet"
        return render_columns(FIRING_COLUMNS, list(found.firings), output, one=False)

    _run((email, password, token), gateway, work)
