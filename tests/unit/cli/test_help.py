"""Help shows a value type for options that take a value, and none for flags."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from agentmesh.cli.main import app


@pytest.mark.parametrize(
    "args", [("--help",), ("up", "--help"), ("chat", "--help"), ("users", "create", "--help")]
)
def test_flags_show_no_type_and_values_do(args: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    help_line = next(line for line in result.output.splitlines() if "--help" in line)
    assert re.search(r"--help\s+Show this message and exit\.", help_line), help_line
    if args != ("--help",):
        assert "<int>" in result.output or "<str>" in result.output  # options with values keep theirs
