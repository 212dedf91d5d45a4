"""The tools one agent may call, with argument validation, timeouts and errors turned into
results the model can read: a bad argument, an unknown tool, a timeout or a crash never ends the
run, the model is told and may correct itself."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import jsonschema

from agentmesh.executor.providers.base import ToolSpec
from agentmesh.executor.tools.base import Tool, ToolAnswer, ToolError, ToolOutput, is_idempotent

logger = logging.getLogger(__name__)

_MAX_ERRORS_SHOWN = 5


def _compile(schema: Any) -> tuple[jsonschema.protocols.Validator | None, str]:
    """A validator for an argument schema, or None and why the schema is invalid."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema), ""
    except jsonschema.SchemaError as error:
        return None, error.message


@functools.lru_cache(maxsize=1024)
def _compiled(canonical: str) -> tuple[jsonschema.protocols.Validator | None, str]:
    """`_compile` memoized per canonical (sorted) schema JSON: checking a schema against its
    meta-schema is costly, and every agent built (every new session) offers the same tools."""
    return _compile(json.loads(canonical))


class ToolSet:
    """Named tools with compiled argument validators. The first tool of a name wins."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator | None] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        name = tool.spec.name
        if name in self._tools:
            logger.warning("tool %r is offered twice; the first one is kept", name)
            return
        self._tools[name] = tool
        schema = tool.spec.parameters or {"type": "object"}
        try:
            key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError):
            key = None
        validator, problem = _compiled(key) if key is not None else _compile(schema)
        if problem:
            # A tool source (an MCP server) with a broken schema: its calls go unvalidated.
            logger.warning("tool %r has an invalid argument schema (%s); not validating", name, problem)
        self._validators[name] = validator

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def idempotent(self, name: str) -> bool:
        """Whether the named tool may be called again when a call's outcome is in doubt."""
        tool = self._tools.get(name)
        return tool is not None and is_idempotent(tool)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self, names: Sequence[str] | None = None) -> list[ToolSpec]:
        """The specs of all tools, or of those named (in the set's order)."""
        return [t.spec for n, t in self._tools.items() if names is None or n in names]

    def validate(self, name: str, arguments: Any) -> str:
        """An error message for arguments that do not fit the tool's schema, else ""."""
        validator = self._validators.get(name)
        if validator is None:
            return ""
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if not errors:
            return ""
        shown = [f"{'/'.join(map(str, e.absolute_path)) or '(arguments)'}: {e.message}" for e in errors]
        more = len(shown) - _MAX_ERRORS_SHOWN
        text = "; ".join(shown[:_MAX_ERRORS_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        return f"invalid arguments for {name}: {text}"

    async def call(
        self, name: str, arguments: Any, *, timeout_seconds: float, answer: ToolAnswer | None = None
    ) -> ToolOutput:
        """Calls a tool — or goes on with a call that asked a person, carrying the `answer` —;
        every failure becomes an error output for the model."""
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            return ToolOutput(
                f"unknown tool {name!r}; available tools: {available}", is_error=True, outcome="refused"
            )
        problem = self.validate(name, arguments)
        if problem:
            return ToolOutput(problem, is_error=True, outcome="refused")
        try:
            async with asyncio.timeout(timeout_seconds):
                if answer is not None:
                    return await tool.call(arguments, answer=answer)
                return await tool.call(arguments)
        except TimeoutError:
            return ToolOutput(
                f"tool {name} timed out after {timeout_seconds:g}s", is_error=True, outcome="timeout"
            )
        except ToolError as error:
            return ToolOutput(str(error), is_error=True)
        except Exception as error:
            logger.warning("tool %s failed", name, exc_info=True)
            return ToolOutput(f"tool {name} failed: {type(error).__name__}: {error}", is_error=True)
