"""`agentmesh`: run the mesh, one service, or talk to it.

Commands import what they need when they run (see `cli/lazy.py`), so the help, `--version` and
`healthcheck` answer without loading the services."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

import typer

from agentmesh.cli.help import hide_flag_types
from agentmesh.cli.lazy import LazyCommand, lazy_group
from agentmesh.cli.mesh import SERVICES, LocalAdmin
from agentmesh.runtime import eventloop

hide_flag_types()
# Before any command imports grpc: each imports what it needs when it runs (cli/lazy.py).
eventloop.prepare_process()

COMMANDS = {
    "trace": LazyCommand(
        "agentmesh.cli.trace:trace",
        "Show a session as a tree: agents, runs, steps, tool calls and delegations, with timings.",
    ),
    "apply": LazyCommand(
        "agentmesh.cli.apply.command:apply_command",
        "Create or update the agent types, projects and agents declared in FILE (idempotent).",
    ),
    "demo": LazyCommand(
        "agentmesh.cli.demo:demo",
        "Run a scripted coordinator/worker delegation end to end against a running mesh, showing each "
        "step live, then the session's trace.",
    ),
    "chat": LazyCommand(
        "agentmesh.cli.chat:chat",
        "Chat with an agent, streaming every step live (without MESSAGE on a terminal: a prompt).",
    ),
    "requests": LazyCommand(
        "agentmesh.cli.input_requests:requests",
        "List a project's requests for a person's input (approvals and questions runs wait for).",
    ),
    "approve": LazyCommand(
        "agentmesh.cli.input_requests:approve",
        "Approve a tool call a run waits for, and follow the resumed run.",
    ),
    "deny": LazyCommand(
        "agentmesh.cli.input_requests:deny",
        "Deny a tool call, or decline a question, a run waits for (the model is told, with the reason), "
        "and follow the run.",
    ),
    "answer": LazyCommand(
        "agentmesh.cli.input_requests:answer",
        "Answer a question a run waits for, and follow the resumed run.",
    ),
    "cancel": LazyCommand(
        "agentmesh.cli.input_requests:cancel",
        "Cancel the run that waits for a request (the session's waiting run, and the runs below it) "
        "instead of answering it: each ends cancelled, and the session takes its next message.",
    ),
    "limits": LazyCommand(
        "agentmesh.cli.limits:limits",
        "Show a project's limits, or set them (superusers; owners may only lower them).",
    ),
    "fork": LazyCommand(
        "agentmesh.cli.sessions:fork",
        "Fork a session at an event into a new session that sees the history up to it.",
    ),
    "versions": LazyCommand(
        "agentmesh.cli.versions:versions",
        "List an agent's versions (every change of it or its type makes one), diff two, or roll back to one.",
    ),
    "move": LazyCommand(
        "agentmesh.cli.versions:move",
        "Move a session (or every session of an agent) to a version of it, or to the latest.",
    ),
    "usage": LazyCommand(
        "agentmesh.cli.usage:usage",
        "Show what a project spent: tokens and cost per agent, user, model, session or day.",
    ),
    "users": LazyCommand("agentmesh.cli.users:users", "Manage users."),
    "api-keys": LazyCommand("agentmesh.cli.api_keys:api_keys", "Manage your API keys."),
    "webhooks": LazyCommand(
        "agentmesh.cli.webhooks:webhooks", "Manage a project's webhooks (signed run events)."
    ),
    "schedules": LazyCommand(
        "agentmesh.cli.schedules:schedules",
        "List, create, delete and run a project's schedules (agents run on a cron), and their history.",
    ),
    "invitations": LazyCommand(
        "agentmesh.cli.invitations:invitations",
        "Issue, list and revoke invitations to register (superusers).",
    ),
    "get": LazyCommand(
        "agentmesh.cli.resources:get",
        "List agent types, projects, agents, sessions or MCP servers (or one), as a table, JSON or YAML.",
    ),
    "describe": LazyCommand(
        "agentmesh.cli.resources:describe_command",
        "Show every field of one agent type, project, agent, session or MCP server (secrets masked).",
    ),
    "delete": LazyCommand(
        "agentmesh.cli.resources:delete",
        "Delete one agent type, project, agent or MCP server (an agent is terminated: final, and kept "
        "with its history).",
    ),
    "login": LazyCommand(
        "agentmesh.cli.login:login",
        "Sign in once and keep the CLI signed in (a refresh token in the user's config directory).",
    ),
    "logout": LazyCommand(
        "agentmesh.cli.login:logout", "Forget the kept login, revoking its refresh token in the mesh."
    ),
}

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    help="agentmesh runs AI agents as a mesh of gRPC microservices.",
    no_args_is_help=True,
    add_completion=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version as distribution_version  # a quarter second to import

        typer.echo(f"agentmesh {distribution_version('agentmesh')}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            "--ca-file",
            envvar="AGENTMESH_TLS_CA_FILE",
            show_envvar=True,
            help="A private CA to check a TLS gateway's certificate with (an https:// gateway address, "
            "or any address once this is set). Default: the system's CAs.",
        ),
    ] = None,
) -> None:
    """agentmesh runs AI agents as a mesh of gRPC microservices."""
    from agentmesh.cli import options

    options.ca_file_override = str(ca_file) if ca_file else None
    # A command's words are its own: a library's log record (the transport failure a command then
    # reports as "cannot reach the mesh") is not printed raw before them. `up` and `serve` route
    # every record themselves (runtime.logging replaces the root's handlers).
    logging.getLogger().addHandler(logging.NullHandler())


# `agentmesh up`'s ports: each flag, the variable that sets it, and what listens there.
_UP_PORTS = {
    "http_port": ("--http-port", "AGENTMESH_GATEWAY_HTTP_PORT", "the gateway's HTTP"),
    "grpc_port": ("--grpc-port", "AGENTMESH_GATEWAY_PORT", "the gateway's gRPC"),
}


@app.command()
def up(
    http_port: Annotated[
        int,
        typer.Option(
            help="Gateway HTTP port (REST, OpenAI-compatible).", envvar="AGENTMESH_GATEWAY_HTTP_PORT"
        ),
    ] = 8080,
    grpc_port: Annotated[
        int, typer.Option(help="Gateway public gRPC port.", envvar="AGENTMESH_GATEWAY_PORT")
    ] = 50050,
    data_dir: Annotated[
        Path, typer.Option(help="Where the embedded SQLite databases live.", envvar="AGENTMESH_DATA_DIR")
    ] = Path(".agentmesh"),
    host: Annotated[
        str, typer.Option(help="Interface every service binds.", envvar="AGENTMESH_HOST")
    ] = "127.0.0.1",
    allow_loopback_egress: Annotated[
        bool,
        typer.Option(
            "--allow-loopback-egress",
            help="Let remote A2A agents and MCP servers on this machine (127.0.0.0/8, ::1) be reached, "
            "besides AGENTMESH_EGRESS_ALLOW: for local development.",
        ),
    ] = False,
) -> None:
    """Start all four services on this host (SQLite unless AGENTMESH_DATABASE_URL is set).

    Flags override the environment, which overrides the defaults."""
    from agentmesh.cli.mesh import create_local_admin, start_mesh
    from agentmesh.runtime.heap import freeze_startup_heap
    from agentmesh.runtime.logging import configure_logging
    from agentmesh.runtime.server import AddressInUse, wait_for_shutdown_signal
    from agentmesh.runtime.service import process_telemetry

    configure_logging()
    data_dir.mkdir(parents=True, exist_ok=True)

    async def main() -> None:
        async with process_telemetry("agentmesh") as meters:
            mesh = await start_mesh(
                data_dir=data_dir,
                grpc_port=grpc_port,
                http_port=http_port,
                host=host,
                allow_loopback_egress=allow_loopback_egress,
            )
            freeze_startup_heap()
            for name, service in mesh.services.items():
                typer.echo(f"{name:<9} gRPC  {service.address}")
            typer.echo(f"{'gateway':<9} HTTP  {mesh.gateway.http.url}")
            if meters is not None and meters.endpoint is not None:
                typer.echo(f"{'metrics':<9} HTTP  {meters.endpoint.url}")
            admin = await create_local_admin(mesh)
            if admin is not None:
                await _hand_over(admin, mesh.gateway.address)
            typer.echo("agentmesh is up; Ctrl-C stops it.")
            await wait_for_shutdown_signal()
            typer.echo("stopping…")
            await mesh.stop()

    try:
        eventloop.run(main())  # uvloop when installed, as every service process
    except AddressInUse as error:
        ports = {"http_port": http_port, "grpc_port": grpc_port}
        named = [_UP_PORTS[key] for key, port in ports.items() if port == error.port and port != 0]
        hint = f" ({named[0][2]}); choose another with {named[0][0]} or {named[0][1]}" if named else ""
        typer.echo(f"agentmesh up: {error.host}:{error.port} is already in use{hint}", err=True)
        raise typer.Exit(1) from None


async def _hand_over(admin: LocalAdmin, gateway: str) -> None:
    """Shows the admin `up` made, once, on stderr — never as a log record: its password is a
    secret, and log lines are shipped elsewhere — and signs the CLI on this machine in as it."""
    from agentmesh.cli.client import CliError
    from agentmesh.cli.login import keep_login

    try:
        path = await keep_login(gateway, admin.email, admin.password)
        kept = f"this machine's CLI is signed in as it (kept in {path})"
    except CliError as error:
        kept = f"could not sign this machine's CLI in ({error}): run `agentmesh login`"
    typer.echo(
        "\n".join(
            (
                "agentmesh up: the mesh had no user, so it made a local admin; its password is shown "
                "this once:",
                f"    e-mail    {admin.email}",
                f"    password  {admin.password}",
                f"  {kept}",
            )
        ),
        err=True,
    )


@app.command(name="serve")
def serve_command(
    service: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}.")],
) -> None:
    """Run one service, configured by AGENTMESH_* variables (as a container runs it)."""
    if service not in SERVICES:
        raise typer.BadParameter(f"unknown service {service!r}; choose one of {', '.join(SERVICES)}")
    from agentmesh.cli.mesh import service_entry
    from agentmesh.runtime.service import run_service

    entry = service_entry(service)
    run_service(service, entry.settings, entry.start)


@app.command()
def healthcheck(
    address: Annotated[str, typer.Argument(help="host:port of a gRPC service.")],
    service: Annotated[str, typer.Option(help="Service name to ask about; empty = the whole server.")] = "",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 2.0,
    tls_ca_file: Annotated[
        Path | None,
        typer.Option(envvar="AGENTMESH_TLS_CA_FILE", help="CA to verify a TLS server with (TLS when set)."),
    ] = None,
    tls_cert_file: Annotated[
        Path | None,
        typer.Option(envvar="AGENTMESH_TLS_CERT_FILE", help="Client certificate, for a mutual-TLS server."),
    ] = None,
    tls_key_file: Annotated[
        Path | None, typer.Option(envvar="AGENTMESH_TLS_KEY_FILE", help="The client certificate's key.")
    ] = None,
) -> None:
    """Ask a service's gRPC health endpoint; exit 0 when it reports SERVING (container healthchecks).
    Over TLS when a CA is given (as the service's own AGENTMESH_TLS_* settings do in its container)."""
    from agentmesh.runtime.health import check_health
    from agentmesh.runtime.tls import TlsFiles

    tls = TlsFiles(cert_file=tls_cert_file, key_file=tls_key_file, ca_file=tls_ca_file)
    status = asyncio.run(check_health(address, service=service, timeout=timeout, tls=tls))
    typer.echo(status)
    raise typer.Exit(0 if status == "SERVING" else 1)


if __name__ == "__main__":
    app()
