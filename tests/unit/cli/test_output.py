"""Tables on a terminal narrower than their rows: ids and key prefixes stay whole (people copy them
into `trace` and `api-keys revoke`); the other columns fold, and past that the table is wider
than the terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agentmesh.cli.output import print_table

COLUMNS = ("id", "name", "prefix", "project_id", "created_at")
ROW = (
    "9c3e0f06-727b-4c40-bfb8-f82a6b7787d8",
    "a name long enough to fold",
    "amk_3l47kh7K",
    "a422dd66-20a9-4556-aef7-09efa0fa610f",
    "2026-11-28T22:15:23.228547Z",
)


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_a_terminal_table_never_cuts_an_id(width: int) -> None:
    written = io.StringIO()
    console = Console(file=written, width=width, force_terminal=True, color_system=None)

    print_table(console, COLUMNS, [ROW])

    text = written.getvalue()
    for whole in (ROW[0], ROW[2], ROW[3]):
        assert whole in text, text
    assert "…" not in text
    for header in ("ID", "NAME", "PREFIX", "PROJECT", "CREATED"):
        assert header in text  # no column dropped to make room
    assert all(word in text for word in ROW[1].split())  # folded, whole
