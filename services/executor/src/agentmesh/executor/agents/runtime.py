"""A built agent (`AgentRuntime`: resolved spec, models, tools) and how it is built and signed.

The signature covers everything that changes how the agent behaves — kind, instructions, models
with their endpoints and a hash of the full API key, model params, tools, MCP servers, network
access, sub-agents and bounds — so the agent cache rebuilds exactly when one of them changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentmesh.executor.agents.cache import SessionScope
from agentmesh.executor.agents.text import DELEGATE, TOOL_CALL
from agentmesh.executor.errors import UnknownTool
from agentmesh.executor.providers.base import ToolSpec
from agentmesh.executor.providers.factory import ModelBinding, ModelFactory, ModelPlan
from agentmesh.executor.tools.base import Tool, ToolError
from agentmesh.executor.tools.builtin import EXIT_LOOP, ExitLoop, builtin_tools
from agentmesh.executor.tools.mcp import McpConnection, server_signature
from agentmesh.executor.tools.mcp_resolution import McpServerResolver, UnavailableServer
from agentmesh.executor.tools.permissions import (
    DENY,
    Permission,
    ToolPermissions,
    delegate_names,
    from_annotations,
    mcp_names,
)
from agentmesh.executor.tools.toolset import ToolSet
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.egress import EgressPolicy

logger = logging.getLogger(__name__)

DELEGATE_TOOL = "delegate"
DELEGATE_EXAMPLE = '{"agent": "<name>", "task": "<task>"}'
TOOL_CALL_EXAMPLE = '{"name": "<tool>", "arguments": {}}'


def fenced(kind: str, body: str) -> str:
    return f"```{kind}\n{body}\n```"


def kind_name(kind: resources_pb2.AgentKind.ValueType) -> str:
    if kind == resources_pb2.AGENT_KIND_UNSPECIFIED:
        return "llm"
    return resources_pb2.AgentKind.Name(kind).removeprefix("AGENT_KIND_").lower()


def delegate_tool_spec(targets: list[str]) -> ToolSpec:
    return ToolSpec(
        name=DELEGATE_TOOL,
        description=(
            "Hand a task to another agent and get its answer back. Give the agent's name and a "
            "complete, self-contained task."
        ),
        parameters={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": targets, "description": "The agent to delegate to."},
                "task": {"type": "string", "description": "The task, with everything the agent needs."},
            },
            "required": ["agent", "task"],
            "additionalProperties": False,
        },
    )


@dataclass
class AgentRuntime:
    """An agent ready to run: its spec, its models and its tools (with and without the escalation
    tool a sub-agent gets). Holds no session state of its own — a session's MCP connections live
    in the session's scope — so releasing it is dropping it.

    Its system prompt is frozen: built once per runtime (per session, since the cache keeps one
    per session), so every turn sends the same bytes and providers' prompt caching works, until a
    changed signature rebuilds the runtime."""

    spec: resources_pb2.AgentSpec
    signature: str
    models: ModelBinding | None
    tools: ToolSet
    sub_agent_tools: ToolSet
    # MCP servers it goes without (not registered, unreachable, …): every run says so.
    unavailable_servers: tuple[UnavailableServer, ...] = ()
    # Which tools it may call on its own, after approval, or not at all (tools/permissions.py).
    permissions: ToolPermissions = field(default_factory=ToolPermissions)
    _system_prompts: dict[bool, str] = field(default_factory=dict, repr=False)
    # Set when a fallback model took over a run: the next message builds afresh (and tries the
    # primary model again), so the cache evicts the runtime when its run ends.
    stale: bool = False

    @property
    def function_calling(self) -> bool:
        params = self.models.plan.params if self.models else {}
        return bool(params.get("function_calling", True))

    @property
    def native_tool_choice(self) -> bool:
        """Whether a client's `tool_choice` goes to its model as the model's own `tool_choice`
        (its models take it, and are offered tools natively), not as an instruction."""
        return self.function_calling and self.models is not None and self.models.takes_tool_choice

    def tool_set(self, *, as_sub_agent: bool) -> ToolSet:
        return self.sub_agent_tools if as_sub_agent else self.tools

    def mark_stale(self) -> None:
        """A fallback model took over: the cache evicts this runtime once its runs end."""
        self.stale = True

    def permission(self, tool_name: str, *, as_sub_agent: bool) -> Permission:
        """Its permission to call one of its tools (or a name the model made up)."""
        tool = self.tool_set(as_sub_agent=as_sub_agent).get(tool_name)
        server = getattr(tool, "server", None)
        if not server:
            return self.permissions.decide((tool_name,))
        return self.permissions.decide(
            mcp_names(server, tool_name), default=from_annotations(getattr(tool, "annotations", None))
        )

    def delegation_permission(self, target: str) -> Permission:
        """Its permission to delegate to `target` (named by slug or by name)."""
        names = self.spec.agent_names
        slug = next((slug for slug, name in names.items() if name == target), target)
        return self.permissions.decide(delegate_names(target, slug, names.get(slug, "")))

    def offered_tools(self, *, as_sub_agent: bool) -> list[ToolSpec]:
        """The tools a run is told about: all but those it may never call."""
        return [
            spec
            for spec in self.tool_set(as_sub_agent=as_sub_agent).specs()
            if self.permission(spec.name, as_sub_agent=as_sub_agent) != DENY
        ]

    def delegation_targets(self) -> list[str]:
        """The agents a run is told it may delegate to: all but those it may never."""
        return [target for target in self.spec.network_access if self.delegation_permission(target) != DENY]

    def may_act(self, *, as_sub_agent: bool) -> bool:
        """Whether a run may call tools or delegate (else its first model step is its answer)."""
        return bool(self.delegation_targets()) or bool(self.offered_tools(as_sub_agent=as_sub_agent))

    def system_prompt(self, *, as_sub_agent: bool) -> str:
        """The instructions, the agents it may delegate to and — for models without function
        calling — how to call tools and delegate in fenced blocks. Built on first use, then frozen."""
        prompt = self._system_prompts.get(as_sub_agent)
        if prompt is None:
            prompt = self._system_prompts[as_sub_agent] = self._build_system_prompt(as_sub_agent)
        return prompt

    def _build_system_prompt(self, as_sub_agent: bool) -> str:
        targets = self.delegation_targets()
        parts = [self.spec.instructions.strip()]
        if targets:
            parts.append(
                "You may delegate a task to these agents of your project: " + ", ".join(targets) + "."
            )
        if not self.function_calling:
            if targets:
                parts.append("To delegate, write a fenced block:\n" + fenced(DELEGATE, DELEGATE_EXAMPLE))
            specs = self.offered_tools(as_sub_agent=as_sub_agent)
            if specs:
                described = "\n".join(
                    f"- {spec.name}: {spec.description} Arguments: {json.dumps(spec.parameters)}"
                    for spec in specs
                )
                parts.append(
                    f"You can call these tools:\n{described}\n"
                    f"To call one, write a fenced block:\n{fenced(TOOL_CALL, TOOL_CALL_EXAMPLE)}"
                )
        return "\n\n".join(part for part in parts if part)

    async def aclose(self) -> None:
        """Soft release: shared model clients stay pooled, the session's MCP connections stay in
        its scope for the next build."""


class AgentBuilder:
    """Builds `AgentRuntime`s from resolved specs."""

    def __init__(
        self,
        models: ModelFactory,
        *,
        function_tools: Mapping[str, Callable[[], Tool]] | None = None,
        mcp_servers: McpServerResolver | None = None,
        mcp_connect_timeout_seconds: float = 30.0,
        egress: EgressPolicy | None = None,
    ) -> None:
        self._models = models
        self._egress = egress or EgressPolicy()
        self._function_tools = {**builtin_tools(), **(function_tools or {})}
        self.secrets = models.secrets
        self._mcp_servers = mcp_servers or McpServerResolver(
            None, system_metadata=lambda: None, environment={}, secrets=self.secrets
        )
        self._mcp_connect_timeout_seconds = mcp_connect_timeout_seconds
        # Builds of an agent that went without an MCP server: part of its signature, so the next
        # run builds it again and tries to connect again, rather than lacking the tools for good.
        self._degraded_builds: dict[str, int] = {}

    @property
    def tool_names(self) -> list[str]:
        """The function tools an agent's `tools` may name here."""
        return sorted(self._function_tools)

    async def plan(self, spec: resources_pb2.AgentSpec) -> tuple[str, ModelPlan | None]:
        """The agent's signature and its model plan (None for workflow kinds)."""
        is_llm = kind_name(spec.kind) == "llm"
        plan = await self._models.plan(spec) if is_llm else None
        payload: dict[str, Any] = {
            "agent_id": spec.agent.id,
            "kind": kind_name(spec.kind),
            "instructions": spec.instructions,
            "model": plan.signature() if plan else None,
            "tools": list(spec.tools),
            "mcp_servers": [
                {"name": server.name, "signature": server_signature(server)} for server in spec.mcp_servers
            ],
            "network_access": list(spec.network_access),
            "sub_agents": list(spec.sub_agents),
            "max_steps": spec.max_steps,
            "max_iterations": spec.max_iterations,
            "tool_permissions": [
                dict(rules)
                for rules in (
                    spec.tool_permissions,
                    spec.agent_tool_permissions,
                    spec.project_tool_permissions,
                )
            ],
            "degraded_builds": self._degraded_builds.get(spec.agent.id, 0),
        }
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
        return digest, plan

    async def build(
        self, spec: resources_pb2.AgentSpec, signature: str, plan: ModelPlan | None, scope: SessionScope
    ) -> AgentRuntime:
        tools: list[Tool] = []
        for name in spec.tools:
            factory = self._function_tools.get(name)
            if factory is None:
                raise UnknownTool(
                    f"agent {spec.agent.name!r} names the tool {name!r}, which this executor does not have",
                    metadata={"tool": name},
                )
            tools.append(factory())
        resolved = await self._mcp_servers.resolve(spec)
        unavailable = list(resolved.unavailable)
        for server in resolved.servers:
            try:
                connection = await scope.get_or_open(
                    server_signature(server),
                    lambda server=server: McpConnection(
                        server,
                        connect_timeout_seconds=self._mcp_connect_timeout_seconds,
                        scrub=self.secrets.scrub,
                        egress=self._egress,
                    ).open(),
                )
            except (ToolError, ValueError) as error:
                unavailable.append(UnavailableServer(server.name, self.secrets.scrub(str(error))))
                continue
            tools.extend(connection.tools)
        if unavailable:
            self._degraded_builds[spec.agent.id] = self._degraded_builds.get(spec.agent.id, 0) + 1
        tool_set = ToolSet(tools)
        sub_agent_tools = tool_set if EXIT_LOOP in tool_set else ToolSet([*tools, ExitLoop()])
        return AgentRuntime(
            spec=spec,
            signature=signature,
            models=self._models.bind(plan) if plan is not None else None,
            tools=tool_set,
            sub_agent_tools=sub_agent_tools,
            unavailable_servers=tuple(unavailable),
            permissions=ToolPermissions.of(spec),
        )
