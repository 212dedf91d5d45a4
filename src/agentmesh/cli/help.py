"""How `--help` shows options: a flag (`--json`, `--help`) takes no value, so it shows no type.

typer 0.29's rich help labels every option with its type, flags included (`--help <bool>`), which
reads as if the flag wanted a value. Patched once, on typer's option class, so that every command,
present and future, lazy or not, reads the same; `tests/unit/cli/test_help.py` holds it.
"""

from __future__ import annotations

from typer import _click
from typer.core import TyperOption

_display_type_rich = TyperOption.display_type_rich


def _no_type_for_flags(option: TyperOption, ctx: _click.Context) -> str | None:
    if option.is_flag and option.metavar is None:
        return None
    return _display_type_rich(option, ctx)


def hide_flag_types() -> None:
    """Makes help list flags without a value type."""
    TyperOption.display_type_rich = _no_type_for_flags  # type: ignore[method-assign]
