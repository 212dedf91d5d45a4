"""Subcommands imported only when they run, so `agentmesh --help`, `--version` and `healthcheck`
answer at once: importing the commands that talk to a mesh costs seconds (gRPC stubs, the
services' clients, the tracing and database stacks behind them).

This is click's documented lazy-group pattern, with one addition: the group's own help lists
each lazy command from a one-line summary given here (a placeholder command), because listing
the real command would import it. `tests/unit/cli/test_lazy_imports.py` holds the summaries
equal to the commands' own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives (`module:attribute`: a command function or a typer.Typer group)
    and the one line the group's help shows for it."""

    target: str
    summary: str

    def load(self, name: str) -> _click.Command:
        module, _, attribute = self.target.partition(":")
        found = getattr(importlib.import_module(module), attribute)
        if isinstance(found, typer.Typer):
            group = typer.main.get_group(found)
            group.name = name
            return group
        single = typer.Typer()
        single.command(name=name)(found)
        return typer.main.get_group(single).commands[name]


class LazyGroup(TyperGroup):
    """A typer group whose subcommands in `lazy_commands` are imported when resolved to run."""

    lazy_commands: Mapping[str, LazyCommand] = {}

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return [*super().list_commands(ctx), *self.lazy_commands]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        # Enough to list in the group's help; resolve_command swaps in the real command.
        return TyperCommand(cmd_name, help=lazy.summary)

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and name in self.lazy_commands:
            command = self.lazy_commands[name].load(name)
        return name, command, rest


def lazy_group(commands: Mapping[str, LazyCommand]) -> type[LazyGroup]:
    """A LazyGroup class serving `commands` (typer.Typer takes a class, not an instance)."""
    return type("AgentmeshCommands", (LazyGroup,), {"lazy_commands": dict(commands)})
