"""A spinner on standard error while a command waits on the mesh.

Only on a terminal: piped or captured output stays exactly the answer. Rich draws it from its
own thread, so it turns while `asyncio.run` blocks, and it is gone (transient) before the answer
is printed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape

T = TypeVar("T")


def run_waiting(coroutine: Coroutine[Any, Any, T], what: str = "asking the mesh") -> T:
    """`asyncio.run(coroutine)`, with a spinner saying `what` while it runs."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return asyncio.run(coroutine)
    with console.status(f"[dim]{escape(what)}…[/]", spinner="dots"):
        return asyncio.run(coroutine)
