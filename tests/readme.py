"""The README's examples as tests read them: a section's code blocks, and a shell block's commands,
so the tests that run them (test_readme_*.py) fail when an example goes stale."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from string import Template

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_blocks(section: str, language: str) -> list[str]:
    """The code blocks of `language` in the README's section titled `section` (`### Title`), in
    order."""
    text = README.read_text()
    start = text.index(f"\n{section}\n")
    end = text.find("\n### ", start + len(section) + 2)
    body = text[start : end if end != -1 else len(text)]
    return re.findall(rf"```{language}\n(.*?)```", body, re.DOTALL)


def shell_commands(block: str, variables: dict[str, str] | None = None) -> list[list[str]]:
    """A shell block's commands as argument lists: lines joined at a trailing backslash or inside
    quotes, comments dropped, `$NAME` replaced from `variables`."""
    joined = Template(block.replace("\\\n", " ")).safe_substitute(variables or {})
    commands, pending = [], ""
    for line in joined.splitlines():
        pending += line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on on the next line
            pending += "\n"
            continue
        pending = ""
        if words:
            commands.append(words)
    assert not pending, f"an unclosed quote in {block!r}"
    return commands
