"""Function tools: arguments validated against their JSON schema, every failure (bad argument,
unknown tool, timeout, crash) an error output for the model, and the built-ins."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from agentmesh.executor.providers.base import ToolSpec
from agentmesh.executor.tools.base import ToolError, ToolOutput
from agentmesh.executor.tools.builtin import ExitLoop, GetCurrentTime
from agentmesh.executor.tools.toolset import ToolSet


class Add:
    spec = ToolSpec(
        name="add",
        description="Adds two integers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    )

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput(str(arguments["a"] + arguments["b"]))


class Misbehaving:
    def __init__(self, name: str, behaviour) -> None:
        self.spec = ToolSpec(name=name, description=name, parameters={"type": "object"})
        self._behaviour = behaviour

    async def call(self, arguments: dict[str, Any]) -> ToolOutput:
        return await self._behaviour()


async def slow() -> ToolOutput:
    await asyncio.sleep(10)
    return ToolOutput("late")


async def crash() -> ToolOutput:
    raise KeyError("boom")


async def refuse() -> ToolOutput:
    raise ToolError("the file does not exist")


TOOLS = ToolSet(
    [
        Add(),
        Misbehaving("slow", slow),
        Misbehaving("crash", crash),
        Misbehaving("refuse", refuse),
        ExitLoop(),
        GetCurrentTime(clock=lambda: datetime(2026, 3, 1, 12, 0, tzinfo=UTC)),
    ]
)


async def call(name: str, arguments: Any, timeout: float = 1.0) -> ToolOutput:
    return await TOOLS.call(name, arguments, timeout_seconds=timeout)


async def test_a_good_call_returns_its_output() -> None:
    assert await call("add", {"a": 2, "b": 40}) == ToolOutput("42")


async def test_bad_arguments_are_an_error_naming_the_field() -> None:
    output = await call("add", {"a": "two", "c": 1})
    assert output.is_error
    assert "invalid arguments for add" in output.text
    assert "a: 'two' is not of type 'integer'" in output.text
    assert "'b' is a required property" in output.text
    assert "'c' was unexpected" in output.text


async def test_failures_become_errors_for_the_model() -> None:
    unknown = await call("nope", {})
    assert unknown.is_error and "unknown tool 'nope'" in unknown.text and "add" in unknown.text
    timed_out = await call("slow", {}, timeout=0.05)
    assert timed_out.is_error and "timed out after 0.05s" in timed_out.text
    crashed = await call("crash", {})
    assert crashed.is_error and "KeyError" in crashed.text
    refused = await call("refuse", {})
    assert refused == ToolOutput("the file does not exist", is_error=True)


async def test_exit_loop_escalates() -> None:
    output = await call("exit_loop", {"reason": "good enough"})
    assert output.escalate and not output.is_error
    assert "good enough" in output.text


async def test_get_current_time_in_utc_and_in_a_zone() -> None:
    assert (await call("get_current_time", {})).text == "2026-03-01T12:00:00+00:00"
    assert (await call("get_current_time", {"timezone": "Asia/Tokyo"})).text == "2026-03-01T21:00:00+09:00"
    bad = await call("get_current_time", {"timezone": "Mars/Olympus"})
    assert bad.is_error and "unknown time zone" in bad.text


def test_specs_and_duplicates() -> None:
    tools = ToolSet([Add(), Add()])
    assert tools.names == ["add"]
    assert [spec.name for spec in TOOLS.specs(["add", "exit_loop"])] == ["add", "exit_loop"]
    broken = Misbehaving("broken", crash)
    broken.spec = ToolSpec(name="broken", description="", parameters={"type": "no-such-type"})
    assert ToolSet([broken]).validate("broken", {"anything": 1}) == "", "a broken schema is not enforced"


class _Plain:
    """A tool that declares nothing about idempotency."""

    spec = ToolSpec(name="plain", description="d", parameters={"type": "object"})

    async def call(self, arguments: dict[str, object]) -> ToolOutput:
        return ToolOutput("ok")


def test_only_declared_tools_are_idempotent() -> None:
    # The built-ins are pure; a tool that says nothing is not; an unknown name is not.
    tools = ToolSet([GetCurrentTime(), ExitLoop(), _Plain()])
    assert tools.idempotent("get_current_time") and tools.idempotent("exit_loop")
    assert not tools.idempotent("plain")
    assert not tools.idempotent("missing")
