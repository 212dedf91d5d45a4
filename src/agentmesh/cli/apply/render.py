"""What `agentmesh apply` prints: one line per declared object and the totals, or the problems."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentmesh.cli.apply.document import problem_line
from agentmesh.cli.apply.plan import Action, Change
from agentmesh.runtime.errors import FieldViolation

_ACTION_STYLE = {Action.CREATE: "green", Action.UPDATE: "yellow", Action.UNCHANGED: "dim"}
_PAST = {Action.CREATE: "created", Action.UPDATE: "updated", Action.UNCHANGED: "unchanged"}
_FUTURE = {Action.CREATE: "would create", Action.UPDATE: "would update", Action.UNCHANGED: "unchanged"}


def render_changes(console: Console, changes: Sequence[Change], *, dry_run: bool = False) -> None:
    """The summary: one line per object, then the totals."""
    words = _FUTURE if dry_run else _PAST
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("kind", style="bold")
    table.add_column("name")
    table.add_column("action", no_wrap=True)
    for change in changes:
        action = words[change.action]
        if change.fields:
            action += f" ({', '.join(change.fields)})"
        if change.recreates:
            action += " (in place of the terminated one)"
        table.add_row(change.kind, escape(change.ref), f"[{_ACTION_STYLE[change.action]}]{action}[/]")
    if changes:
        console.print(table)
    counts = {action: sum(change.action is action for change in changes) for action in Action}
    totals = ", ".join(f"{counts[action]} {words[action]}" for action in Action)
    console.print(f"{'dry run, nothing changed: ' if dry_run else ''}{totals}", soft_wrap=True)


def render_versions(console: Console, changes: Sequence[Change]) -> None:
    """One line per agent the apply gave a new version, with the fields that changed in it."""
    for change in changes:
        if change.version:
            what = f" ({', '.join(change.version_fields)} changed)" if change.version_fields else ""
            console.print(
                f"{change.kind} {escape(change.ref)}: version {change.version}{escape(what)}",
                soft_wrap=True,
                highlight=False,
            )


def render_warnings(console: Console, changes: Sequence[Change]) -> None:
    """What the registry warned about the objects written, one line each under their name."""
    for change in changes:
        for warning in dict.fromkeys(change.warnings):
            console.print(
                f"[bold yellow]warning:[/] {change.kind} {escape(change.ref)}: {escape(warning)}",
                soft_wrap=True,
                highlight=False,
            )


def render_problems(console: Console, title: str, problems: Sequence[FieldViolation]) -> None:
    """An error title, then one line per problem with its place in the file."""
    console.print(f"[bold red]error:[/] {escape(title)}", soft_wrap=True)
    for problem in problems:
        console.print(f"  {escape(problem_line(problem))}", soft_wrap=True, highlight=False)
