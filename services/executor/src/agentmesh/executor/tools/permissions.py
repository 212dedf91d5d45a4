"""Tool permissions (DESIGN §12, docs/human-in-the-loop.md): whether an agent may call a tool on
its own (`allow`), after a person approved the call (`ask`), or not at all (`deny`).

An agent's spec carries three rule maps — its type's, its own config's and its project's — each
from a tool name or glob pattern to a permission. Each map decides by its most specific rule (an
exact name before any pattern, then the pattern with the most characters that are not wildcards;
a tie goes to the stricter), a map with no matching rule has no opinion, and the strictest opinion
counts: an agent's config and its project's owner can tighten the type's rules, never loosen them.
With no opinion at all, an MCP tool's annotations decide (`readOnlyHint` allow, `destructiveHint`
ask), anything else is allowed.

A tool's names, for matching: a built-in's name; an MCP server's tool `mcp:<server>:<tool>` and its
bare name; a delegation `delegate:<agent>` under each name the agent goes by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from agentmesh.common.v1 import types_pb2
from agentmesh.registry.v1 import resources_pb2

Permission = Literal["allow", "ask", "deny"]
ALLOW: Permission = "allow"
ASK: Permission = "ask"
DENY: Permission = "deny"

_STRICTNESS: dict[Permission, int] = {ALLOW: 0, ASK: 1, DENY: 2}
_FROM_PROTO: dict[int, Permission] = {
    types_pb2.TOOL_PERMISSION_ALLOW: ALLOW,
    types_pb2.TOOL_PERMISSION_ASK: ASK,
    types_pb2.TOOL_PERMISSION_DENY: DENY,
}
_WILDCARDS = frozenset("*?[]")

NOT_PERMITTED = "not permitted: this agent may not call this tool"


def strictest(permissions: Iterable[Permission]) -> Permission:
    return max(permissions, key=_STRICTNESS.__getitem__, default=ALLOW)


def _specificity(pattern: str) -> int:
    return sum(1 for char in pattern if char not in _WILDCARDS)


def decide_in(rules: Mapping[str, Permission], names: Sequence[str]) -> Permission | None:
    """One map's decision for a tool that goes by `names` (None: no rule matches)."""
    exact = [rules[name] for name in names if name in rules]
    if exact:
        return strictest(exact)
    matching = [
        (_specificity(pattern), permission)
        for pattern, permission in rules.items()
        if any(fnmatchcase(name, pattern) for name in names)
    ]
    if not matching:
        return None
    best = max(specificity for specificity, _ in matching)
    return strictest(permission for specificity, permission in matching if specificity == best)


def mcp_names(server: str, tool: str) -> tuple[str, ...]:
    return (f"mcp:{server}:{tool}", tool)


def delegate_names(*targets: str) -> tuple[str, ...]:
    return tuple(f"delegate:{target}" for target in dict.fromkeys(targets) if target)


def from_annotations(annotations: object | None) -> Permission:
    """What an MCP tool's annotations say when no rule does: read-only tools run, tools that
    declare themselves destructive ask, the others run (as they did before rules existed)."""
    if annotations is None:
        return ALLOW
    if getattr(annotations, "read_only_hint", None) is True:
        return ALLOW
    if getattr(annotations, "destructive_hint", None) is True:
        return ASK
    return ALLOW


@dataclass(frozen=True)
class ToolPermissions:
    """An agent's rule maps (the type's, its own, its project's), deciding together."""

    layers: tuple[Mapping[str, Permission], ...] = ()

    @classmethod
    def of(cls, spec: resources_pb2.AgentSpec) -> ToolPermissions:
        maps = (spec.tool_permissions, spec.agent_tool_permissions, spec.project_tool_permissions)
        return cls(
            tuple(
                {pattern: _FROM_PROTO[value] for pattern, value in rules.items() if value in _FROM_PROTO}
                for rules in maps
                if rules
            )
        )

    def decide(self, names: Sequence[str], *, default: Permission = ALLOW) -> Permission:
        """The strictest opinion of the maps on a tool that goes by `names`; `default` when none
        has one."""
        opinions = [opinion for layer in self.layers if (opinion := decide_in(layer, names)) is not None]
        return strictest(opinions) if opinions else default
