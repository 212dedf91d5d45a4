"""`agentmesh`: run the mesh, one service, or talk to it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from agentmesh.cli.apply import apply_command
from agentmesh.cli.chat import chat
from agentmesh.cli.demo import demo
from agentmesh.cli.mesh import SERVICES, service_entry, start_mesh
from agentmesh.cli.trace import trace
from agentmesh.cli.users import users
from agentmesh.runtime.logging import configure_logging
from agentmesh.runtime.server import check_health, wait_for_shutdown_signal
from agentmesh.runtime.service import process_telemetry, run_service

app = typer.Typer(
    help="agentmesh runs AI agents as a mesh of gRPC microservices.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def up(
    http_port: Annotated[int, typer.Option(help="Gateway HTTP port (REST, OpenAI-compatible).")] = 8080,
    grpc_port: Annotated[int, typer.Option(help="Gateway public gRPC port.")] = 50050,
    data_dir: Annotated[Path, typer.Option(help="Where the embedded SQLite databases live.")] = Path(
        ".agentmesh"
    ),
    host: Annotated[str, typer.Option(help="Interface every service binds.")] = "127.0.0.1",
) -> None:
    """Start all four services on this host (SQLite unless AGENTMESH_DATABASE_URL is set)."""
    configure_logging()
    data_dir.mkdir(parents=True, exist_ok=True)

    async def main() -> None:
        async with process_telemetry("agentmesh") as meters:
            mesh = await start_mesh(data_dir=data_dir, grpc_port=grpc_port, http_port=http_port, host=host)
            for name, service in mesh.services.items():
                typer.echo(f"{name:<9} gRPC  {service.address}")
            typer.echo(f"{'gateway':<9} HTTP  {mesh.gateway.http.url}")
            if meters is not None and meters.endpoint is not None:
                typer.echo(f"{'metrics':<9} HTTP  {meters.endpoint.url}")
            typer.echo("agentmesh is up; Ctrl-C stops it.")
            await wait_for_shutdown_signal()
            typer.echo("stopping…")
            await mesh.stop()

    asyncio.run(main())


@app.command(name="serve")
def serve_command(
    service: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}.")],
) -> None:
    """Run one service, configured by AGENTMESH_* variables (as a container runs it)."""
    if service not in SERVICES:
        raise typer.BadParameter(f"unknown service {service!r}; choose one of {', '.join(SERVICES)}")
    entry = service_entry(service)
    run_service(service, entry.settings, entry.start)


@app.command()
def healthcheck(
    address: Annotated[str, typer.Argument(help="host:port of a gRPC service.")],
    service: Annotated[str, typer.Option(help="Service name to ask about; empty = the whole server.")] = "",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 2.0,
) -> None:
    """Ask a service's gRPC health endpoint; exit 0 when it reports SERVING (container healthchecks)."""
    status = asyncio.run(check_health(address, service=service, timeout=timeout))
    typer.echo(status)
    raise typer.Exit(0 if status == "SERVING" else 1)


app.command(name="trace")(trace)
app.command(name="apply")(apply_command)
app.command(name="demo")(demo)
app.command(name="chat")(chat)
app.add_typer(users, name="users")


if __name__ == "__main__":
    app()
