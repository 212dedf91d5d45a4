"""`agentmesh webhooks create | list | deliveries | test | delete`: a project's webhooks, through
the gateway's gRPC port. `create` prints the signing secret once; nothing shows it again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.cli.resources import Output

webhooks = typer.Typer(
    help="Manage a project's webhooks (signed run events).", no_args_is_help=True, add_completion=False
)

COLUMNS = ("id", "url", "events", "description", "created_at")
DELIVERY_COLUMNS = (
    "id",
    "event",
    "run_id",
    "state",
    "attempts",
    "last_status_code",
    "last_error",
    "created_at",
)
EVENTS = ("run.started", "run.input_requested", "run.completed", "run.failed")
ProjectArgument = Annotated[str, typer.Argument(help="The project (slug or id).")]
OutputOption = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")]


def _run(
    credentials: tuple[str | None, str | None, str | None],
    gateway: str | None,
    work: Callable[[Any, str], Awaitable[str | None]],
    project: str,
) -> None:
    """Signs in, finds the project and runs `work(connection, project_id)`, printing what it
    returns; one clear line on failure."""
    from agentmesh.cli.client import run_signed_in

    async def in_project(connection: Any) -> str | None:
        from agentmesh.cli.resources import project_id_of

        return await work(connection, await project_id_of(connection, project))

    run_signed_in(gateway, credentials, in_project)


async def _call(connection: Any, method: str, request: Any) -> Any:
    from agentmesh.runtime.client import unary

    return await unary(getattr(connection.registry.stub, method), request, metadata=connection.metadata)


@webhooks.command("create")
def create(
    project: ProjectArgument,
    url: Annotated[str, typer.Argument(help="Where to POST the events (https).")],
    event: Annotated[
        list[str] | None,
        typer.Option(
            "--event", "-e", help=f"An event to deliver (repeatable; default all): {', '.join(EVENTS)}."
        ),
    ] = None,
    description: Annotated[str, typer.Option("--description", help="What it is for.")] = "",
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Subscribe URL to the project's run events and print the signing secret (shown only now)."""

    async def work(connection: Any, project_id: str) -> str | None:
        from agentmesh.registry.v1 import registry_service_pb2 as reg
        from agentmesh.registry.v1 import resources_pb2

        webhook = resources_pb2.Webhook(
            project_id=project_id, url=url, events=event or list(EVENTS), description=description
        )
        made = (await _call(connection, "CreateWebhook", reg.CreateWebhookRequest(webhook=webhook))).webhook
        typer.echo(
            f"webhook {made.id} created; store its signing secret now, it is not shown again:", err=True
        )
        return str(made.secret)

    _run((email, password, token), gateway, work, project)


@webhooks.command("list")
def list_command(
    project: ProjectArgument,
    output: OutputOption = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List the project's webhooks (never their secrets)."""

    async def work(connection: Any, project_id: str) -> str | None:
        from agentmesh.cli.resources import render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg

        found = await _call(connection, "ListWebhooks", reg.ListWebhooksRequest(project_id=project_id))
        if output is Output.table and not found.webhooks:
            return "no webhooks"
        return render_columns(COLUMNS, found.webhooks, output, one=False)

    _run((email, password, token), gateway, work, project)


@webhooks.command("deliveries")
def deliveries(
    project: ProjectArgument,
    webhook: Annotated[str, typer.Argument(help="The webhook's id.")],
    output: OutputOption = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List a webhook's deliveries and how their attempts went."""

    async def work(connection: Any, project_id: str) -> str | None:
        from agentmesh.cli.resources import render_columns
        from agentmesh.registry.v1 import registry_service_pb2 as reg

        request = reg.ListWebhookDeliveriesRequest(project_id=project_id, webhook_id=webhook)
        found = await _call(connection, "ListWebhookDeliveries", request)
        if output is Output.table and not found.deliveries:
            return "no deliveries"
        return render_columns(DELIVERY_COLUMNS, found.deliveries, output, one=False)

    _run((email, password, token), gateway, work, project)


@webhooks.command("test")
def test(
    project: ProjectArgument,
    webhook: Annotated[str, typer.Argument(help="The webhook's id.")],
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Send the webhook a `webhook.test` event (see `deliveries` for how it went)."""

    async def work(connection: Any, project_id: str) -> str | None:
        from agentmesh.registry.v1 import registry_service_pb2 as reg

        sent = await _call(
            connection, "TestWebhook", reg.TestWebhookRequest(project_id=project_id, id=webhook)
        )
        return f"test event enqueued: delivery {sent.delivery_id}"

    _run((email, password, token), gateway, work, project)


@webhooks.command("delete")
def delete(
    project: ProjectArgument,
    webhook: Annotated[str, typer.Argument(help="The webhook's id.")],
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Delete a webhook; its deliveries not made yet are not made."""

    async def work(connection: Any, project_id: str) -> str | None:
        from agentmesh.registry.v1 import registry_service_pb2 as reg

        await _call(connection, "DeleteWebhook", reg.DeleteWebhookRequest(project_id=project_id, id=webhook))
        return f"webhook {webhook} deleted"

    _run((email, password, token), gateway, work, project)
