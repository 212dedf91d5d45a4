"""How the CLI writes: styled for a person at a terminal, plain for a program reading a pipe.

On a terminal rich styles the text, wraps it to the terminal's width and turns spinners. Anywhere
else (a pipe, a file, a captured run) output is plain text: no styles, no spinner, every line
complete and never wrapped, so what a program reads — an id, the `agentmesh trace` command `chat`
prints — is whole. Tables never cut ids or key prefixes, on a terminal either: there the other
columns fold first, and when that is not enough the table is wider than the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# A plain console's width: lines are as long as their text (rich pads none of them), so this only
# needs to be more than any line the CLI writes.
PLAIN_WIDTH = 1_000_000
# On a terminal a foldable column may narrow to this many cells before the table grows past it.
FOLDED_WIDTH = 8
_COLUMN_GAP = 2


def stdout_console() -> Console:
    return _console(stderr=False)


def stderr_console() -> Console:
    return _console(stderr=True)


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(
        stderr=stderr, width=PLAIN_WIDTH, no_color=True, highlight=False, soft_wrap=True, emoji=False
    )


def is_whole(column: str) -> bool:
    """Whether a column holds what people copy into another command (ids, key prefixes): shown
    whole, always."""
    return column == "id" or column.endswith("_id") or column == "prefix"


def print_table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows under the columns' names (upper case): aligned plain lines off a terminal; on one, a
    rich table whose ids stay whole."""
    headers = [column.upper().replace("_", " ") for column in columns]
    naturals = [
        max(cell_len(header), *(cell_len(row[index]) for row in rows)) for index, header in enumerate(headers)
    ]
    if not console.is_terminal:
        for cells in (headers, *rows):
            padded = (
                cell + " " * (width - cell_len(cell)) for cell, width in zip(cells, naturals, strict=True)
            )
            console.out((" " * _COLUMN_GAP).join(padded).rstrip(), highlight=False)
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    narrowest = 0
    for column, header, natural in zip(columns, headers, naturals, strict=True):
        whole = is_whole(column)
        least = natural if whole else min(natural, FOLDED_WIDTH)
        narrowest += least + _COLUMN_GAP
        table.add_column(escape(header), no_wrap=whole, min_width=least, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    terminal_width = console.width
    # Wider than the terminal when the ids need it (it wraps the lines; rich would drop columns).
    console.width = max(terminal_width, narrowest - _COLUMN_GAP)
    try:
        console.print(table, crop=False)
    finally:
        console.width = terminal_width


def print_heading(console: Console, title: str) -> None:
    """A section's title (markup): a rule across a terminal, a plain line elsewhere."""
    if console.is_terminal:
        console.rule(f"[bold]{title}")
    else:
        console.print(f"== {title} ==")
