"""`agentmesh get | describe | delete KIND [NAME]`: kubectl-style reads and deletes of what the mesh
holds — agent types, projects, agents, sessions and registered MCP servers — through the gateway's
gRPC port, signed in like every command.

Each kind is one `Kind` row: how to list it (page after page), find one by the name people use
(a slug, an agent's exact name, a session id; an id works too), delete one, and which columns a
table shows. Output is a table, or the resources as JSON or YAML (`-o`), with the proto field names
and enum values written as REST writes them (`idle`, `llm`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer

from agentmesh.cli.options import EmailOption, GatewayOption, PasswordOption, TokenOption
from agentmesh.runtime.protos import plain_dict

Message = Any  # a generated protobuf message


class Output(StrEnum):
    """How `get` prints."""

    table = "table"
    json = "json"
    yaml = "yaml"


@dataclass(frozen=True)
class Scope:
    """Where the command looks: the signed-in connection and, for project-scoped kinds, the
    project's id."""

    connection: Any  # agentmesh.cli.client.Connection
    project_id: str = ""

    @property
    def metadata(self) -> Any:
        return self.connection.metadata


@dataclass(frozen=True)
class Kind:
    """One kind of resource the commands know."""

    name: str
    aliases: tuple[str, ...]
    in_project: bool
    columns: tuple[str, ...]
    list: Callable[[Scope], AsyncIterator[Message]]
    find: Callable[[Scope, str], Awaitable[Message]]
    # Deletes one; what the mesh said about it, if anything (an agent is terminated, and kept).
    delete: Callable[[Scope, Message], Awaitable[str | None]] | None = None
    cannot_delete: str = ""

    @property
    def singular(self) -> str:
        return self.name.removesuffix("s")


async def _pages(fetch: Callable[[str], Awaitable[Any]], field: str) -> AsyncIterator[Message]:
    token = ""
    while True:
        response = await fetch(token)
        for item in getattr(response, field):
            yield item
        token = response.next_page_token
        if not token:
            return


async def _first_found(*lookups: Callable[[], Awaitable[Message]]) -> Message:
    """The first lookup that finds something (by slug, then by id, …); the last NOT_FOUND else."""
    from agentmesh.runtime.errors import InvalidArgument, NotFound

    error: Exception | None = None
    for lookup in lookups:
        try:
            return await lookup()
        except (NotFound, InvalidArgument) as missing:
            error = missing
    assert error is not None
    raise error


def _kinds() -> dict[str, Kind]:
    def registry(scope: Scope) -> Any:
        return scope.connection.registry

    def memory(scope: Scope) -> Any:
        from agentmesh.memory.client import MemoryClient

        return MemoryClient(scope.connection.channel)

    kinds = [
        Kind(
            "agent-types",
            ("agent-type", "types", "type"),
            False,
            ("slug", "name", "kind", "primary_model", "is_active"),
            lambda s: _pages(
                lambda t: registry(s).list_agent_types(page_size=100, page_token=t, metadata=s.metadata),
                "agent_types",
            ),
            lambda s, name: _first_found(
                lambda: registry(s).get_agent_type(slug=name, metadata=s.metadata),
                lambda: registry(s).get_agent_type(agent_type_id=name, metadata=s.metadata),
            ),
            lambda s, found: registry(s).delete_agent_type(found.id, metadata=s.metadata),
        ),
        Kind(
            "projects",
            ("project",),
            False,
            ("slug", "name", "id"),
            lambda s: _pages(
                lambda t: registry(s).list_projects(page_size=100, page_token=t, metadata=s.metadata),
                "projects",
            ),
            lambda s, name: _find_project(registry(s), name, s.metadata),
            lambda s, found: registry(s).delete_project(found.id, metadata=s.metadata),
        ),
        Kind(
            "agents",
            ("agent",),
            True,
            ("slug", "name", "status", "public", "tasks_completed", "tokens_used"),
            lambda s: _pages(
                lambda t: registry(s).list_agents(
                    s.project_id, page_size=100, page_token=t, metadata=s.metadata
                ),
                "agents",
            ),
            # The registry finds an agent by id, slug or exact name.
            lambda s, name: registry(s).get_agent(s.project_id, name, metadata=s.metadata),
            lambda s, found: registry(s).delete_agent(s.project_id, found.id, metadata=s.metadata),
        ),
        Kind(
            "sessions",
            ("session",),
            True,
            ("id", "agent", "last_seq", "updated_at"),
            lambda s: _pages(
                lambda t: memory(s).list_sessions(
                    s.project_id, page_size=100, page_token=t, metadata=s.metadata
                ),
                "sessions",
            ),
            lambda s, name: memory(s).get_session(name, project_id=s.project_id, metadata=s.metadata),
            cannot_delete="a session's events are append-only: they go with their project, or by its "
            "retention policy",
        ),
        Kind(
            "mcp-servers",
            ("mcp-server", "mcp"),
            False,
            ("name", "transport", "project_id", "url", "command"),
            lambda s: _pages(
                lambda t: registry(s).list_mcp_servers(
                    project_id=s.project_id, page_size=100, page_token=t, metadata=s.metadata
                ),
                "mcp_servers",
            ),
            lambda s, name: _first_found(
                lambda: registry(s).get_mcp_server(name=name, project_id=s.project_id, metadata=s.metadata),
                lambda: registry(s).get_mcp_server(mcp_server_id=name, metadata=s.metadata),
            ),
            lambda s, found: registry(s).delete_mcp_server(found.id, metadata=s.metadata),
        ),
    ]
    return {alias: kind for kind in kinds for alias in (kind.name, *kind.aliases)}


async def _find_project(registry: Any, name: str, metadata: Any) -> Message:
    return await _first_found(
        lambda: registry.get_project(slug=name, metadata=metadata),
        lambda: registry.get_project(project_id=name, metadata=metadata),
    )


async def project_id_of(connection: Any, project: str) -> str:
    """The id of the project `project` (a slug or an id) names, among those the caller may see."""
    return (await find_project(connection, project)).id


async def find_project(connection: Any, project: str) -> Message:
    """The project `project` (a slug or an id) names, among those the caller may see."""
    from agentmesh.cli.client import CliError
    from agentmesh.runtime.errors import NotFound

    try:
        return await _find_project(connection.registry, project, connection.metadata)
    except NotFound:
        raise CliError(f"no project {project!r} that you may see") from None


async def visible_projects(connection: Any) -> list[Message]:
    """Every project the caller may see."""
    return [item async for item in _kinds()["projects"].list(Scope(connection))]


# --- output ------------------------------------------------------------------------------------


def render(kind: Kind, items: Sequence[Message], output: Output, *, one: bool) -> str | None:
    """JSON or YAML text (one object, or a list), or None after printing a table."""
    return render_columns(kind.columns, items, output, one=one)


def render_columns(
    columns: Sequence[str], items: Sequence[Message], output: Output, *, one: bool
) -> str | None:
    """As `render`, the table showing `columns`."""
    rows = [plain_dict(item) for item in items]
    data: Any = rows[0] if one else rows
    if output is Output.json:
        return json.dumps(data, indent=2, ensure_ascii=False)
    if output is Output.yaml:
        import yaml

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip()
    from agentmesh.cli.output import print_table, stdout_console

    table = [
        [_cell(_field(item, row, column)) for column in columns]
        for item, row in zip(items, rows, strict=True)
    ]
    print_table(stdout_console(), columns, table)
    return None


def _field(item: Message, row: dict[str, Any], column: str) -> Any:
    """The column's value in the row; a yes/no field JSON leaves out when false is `False`."""
    if column in row:
        return row[column]
    field = item.DESCRIPTOR.fields_by_name.get(column)
    return False if field is not None and field.type == field.TYPE_BOOL else None


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):  # a version's field as the diff of versions shows it
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# --- commands ----------------------------------------------------------------------------------

KindArgument = Annotated[
    str, typer.Argument(help="agent-types, projects, agents, sessions or mcp-servers.", show_default=False)
]
ProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        help="The project (slug or id) of agents and sessions; of MCP servers, to list its own.",
    ),
]


def _run(
    kind_name: str,
    name: str | None,
    project: str | None,
    credentials: tuple[str | None, str | None, str | None],
    gateway: str | None,
    work: Callable[[Kind, Scope], Awaitable[str | None]],
) -> None:
    from agentmesh.cli.client import fail, run_signed_in

    kinds = _kinds()
    kind = kinds.get(kind_name.lower())
    if kind is None:
        names = ", ".join(dict.fromkeys(k.name for k in kinds.values()))
        raise fail(f"unknown kind {kind_name!r}; one of: {names}")
    if kind.in_project and not project:
        raise fail(f"{kind.name} belong to a project: name it with --project SLUG")

    async def main(connection: Any) -> str | None:
        from agentmesh.cli.client import CliError
        from agentmesh.runtime.errors import NotFound

        project_id = await project_id_of(connection, project) if project else ""
        try:
            return await work(kind, Scope(connection, project_id))
        except NotFound:
            if name is None:
                raise
            # Named as the user named it: the mesh's own words ("project not found") do not say.
            where = f" in project {project!r}" if project else ""
            raise CliError(f"no {kind.singular} {name!r}{where} that you may see") from None

    run_signed_in(gateway, credentials, main)


def get(
    kind: KindArgument,
    name: Annotated[
        str | None, typer.Argument(help="One of them (slug, name or id); all when left out.")
    ] = None,
    project: ProjectOption = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """List agent types, projects, agents, sessions or MCP servers (or one), as a table, JSON or YAML."""

    async def work(found_kind: Kind, scope: Scope) -> str | None:
        items = (
            [await found_kind.find(scope, name)] if name else [item async for item in found_kind.list(scope)]
        )
        if output is Output.table and not items:
            return f"no {found_kind.name}"
        return render(found_kind, items, output, one=name is not None)

    _run(kind, name, project, (email, password, token), gateway, work)


def describe_command(
    kind: KindArgument,
    name: Annotated[str, typer.Argument(help="Which one: its slug, name or id.")],
    project: ProjectOption = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="yaml or json.")] = Output.yaml,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Show every field of one agent type, project, agent, session or MCP server (secrets masked)."""

    async def work(found_kind: Kind, scope: Scope) -> str | None:
        shown = Output.yaml if output is Output.table else output
        return render(found_kind, [await found_kind.find(scope, name)], shown, one=True)

    _run(kind, name, project, (email, password, token), gateway, work)


def delete(
    kind: KindArgument,
    name: Annotated[str, typer.Argument(help="Which one: its slug, name or id.")],
    project: ProjectOption = None,
    gateway: GatewayOption = None,
    email: EmailOption = None,
    password: PasswordOption = None,
    token: TokenOption = None,
) -> None:
    """Delete one agent type, project, agent or MCP server (an agent is terminated: final, and kept
    with its history)."""

    async def work(found_kind: Kind, scope: Scope) -> str | None:
        from agentmesh.cli.client import CliError

        if found_kind.delete is None:
            raise CliError(f"{found_kind.name} cannot be deleted: {found_kind.cannot_delete}")
        found = await found_kind.find(scope, name)
        said = await found_kind.delete(scope, found)
        return said or f"{found_kind.singular} {name} deleted"

    _run(kind, name, project, (email, password, token), gateway, work)
