"""How an agent's rule maps decide a tool's permission (tools/permissions.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentmesh.common.v1 import types_pb2
from agentmesh.executor.tools.permissions import (
    ALLOW,
    ASK,
    DENY,
    ToolPermissions,
    decide_in,
    delegate_names,
    from_annotations,
    mcp_names,
)
from agentmesh.registry.v1 import resources_pb2


@pytest.mark.parametrize(
    ("rules", "names", "expected"),
    [
        ({}, ("get_current_time",), None),  # no rule: no opinion
        ({"get_current_time": DENY}, ("get_current_time",), DENY),
        ({"*": DENY, "get_current_time": ALLOW}, ("get_current_time",), ALLOW),  # exact beats any pattern
        ({"mcp:*": ASK, "mcp:files:read_*": ALLOW}, mcp_names("files", "read_file"), ALLOW),  # longer pattern
        ({"mcp:*": ASK, "mcp:files:read_*": ALLOW}, mcp_names("files", "write_file"), ASK),
        ({"mcp:*": ASK}, mcp_names("files", "write_file"), ASK),
        ({"write_file": DENY}, mcp_names("files", "write_file"), DENY),  # an MCP tool's bare name
        ({"a*": ALLOW, "*b": DENY}, ("ab",), DENY),  # equally specific: the stricter
        ({"delegate:*": ASK}, delegate_names("payments", "Payments Team"), ASK),
        ({"delegate:Payments Team": DENY}, delegate_names("payments", "Payments Team"), DENY),
        ({"get_?urrent_time": DENY}, ("get_current_time",), DENY),
        ({"[gh]et_*": DENY}, ("set_x",), None),
    ],
)
def test_one_map_decides_by_its_most_specific_rule(rules, names, expected) -> None:
    assert decide_in(rules, names) == expected


def spec(type_rules=None, agent_rules=None, project_rules=None) -> resources_pb2.AgentSpec:
    def proto(rules):
        return {
            k: types_pb2.ToolPermission.Value(f"TOOL_PERMISSION_{v.upper()}")
            for k, v in (rules or {}).items()
        }

    return resources_pb2.AgentSpec(
        tool_permissions=proto(type_rules),
        agent_tool_permissions=proto(agent_rules),
        project_tool_permissions=proto(project_rules),
    )


@pytest.mark.parametrize(
    ("type_rules", "agent_rules", "project_rules", "expected"),
    [
        ({}, {}, {}, ALLOW),
        ({"x": ASK}, {}, {}, ASK),
        ({"x": ASK}, {"x": ALLOW}, {}, ASK),  # a config tightens, never loosens
        ({"x": ALLOW}, {}, {"*": DENY}, DENY),  # the owner's pattern still counts
        ({"x": DENY}, {"x": ALLOW}, {"x": ALLOW}, DENY),
        ({}, {"x": ASK}, {}, ASK),
    ],
)
def test_the_strictest_map_counts(type_rules, agent_rules, project_rules, expected) -> None:
    permissions = ToolPermissions.of(spec(type_rules, agent_rules, project_rules))
    assert permissions.decide(("x",)) == expected


def test_with_no_opinion_the_default_decides() -> None:
    assert ToolPermissions.of(spec({"y": DENY})).decide(("x",), default=ASK) == ASK
    assert ToolPermissions.of(spec({"x": ALLOW})).decide(("x",), default=ASK) == ALLOW


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, ALLOW),
        (SimpleNamespace(read_only_hint=True, destructive_hint=True), ALLOW),
        (SimpleNamespace(read_only_hint=False, destructive_hint=True), ASK),
        (SimpleNamespace(read_only_hint=None, destructive_hint=None), ALLOW),
        (SimpleNamespace(read_only_hint=False, destructive_hint=False), ALLOW),
    ],
)
def test_mcp_annotations_decide_without_a_rule(annotations, expected) -> None:
    assert from_annotations(annotations) == expected
