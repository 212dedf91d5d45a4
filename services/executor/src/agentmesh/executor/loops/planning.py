"""A model step's reply as the calls the LLM loop runs (loops/llm.py): its native tool calls and
its fenced ```tool_call / ```delegate blocks, in that order, each a `PlannedCall` with its step,
its place and its permission (loops/asking.py) — a delegation when the model called the
`delegate` tool the loop offers (not a tool of the agent's own of that name) or wrote a block."""

from __future__ import annotations

from collections.abc import Container

from agentmesh.executor.agents.runtime import DELEGATE_TOOL, AgentRuntime
from agentmesh.executor.agents.text import DELEGATE
from agentmesh.executor.context.scope import RunScope
from agentmesh.executor.durability.run_log import DELEGATION, INVALID, TOOL, PlannedCall
from agentmesh.executor.loops import asking
from agentmesh.executor.loops.model_step import ModelReply


def plan(
    reply: ModelReply, step: int, runtime: AgentRuntime, scope: RunScope, *, tools: Container[str]
) -> list[PlannedCall]:
    """The step's calls; `tools`: the agent's own tools by name."""
    calls: list[PlannedCall] = []
    for call in reply.native_calls:
        if call.name == DELEGATE_TOOL and DELEGATE_TOOL not in tools and not call.error:
            agent, task = call.arguments.get("agent"), call.arguments.get("task")
            if isinstance(agent, str) and isinstance(task, str) and agent and task:
                calls.append(PlannedCall(DELEGATION, call.id, agent, call.arguments, task=task))
                continue
            error = 'delegate needs the string arguments "agent" and "task"'
            calls.append(PlannedCall(TOOL, call.id, call.name, call.arguments, error=error))
            continue
        calls.append(PlannedCall(TOOL, call.id, call.name, call.arguments, error=call.error))
    for index, block in enumerate(reply.blocks, start=1):
        call_id = f"block_{index}"
        try:
            value = block.parse()
        except ValueError as error:
            calls.append(PlannedCall(INVALID, call_id, block.kind, error=str(error), native=False))
            continue
        if block.kind == DELEGATE:
            calls.append(
                PlannedCall(DELEGATION, call_id, value["agent"], value, task=value["task"], native=False)
            )
        else:
            arguments = value.get("arguments") or {}
            calls.append(PlannedCall(TOOL, call_id, value["name"], arguments, native=False))
    for index, call in enumerate(calls):
        call.step, call.index = step, index
        calls[index] = asking.permitted(call, runtime, scope)
    return calls
