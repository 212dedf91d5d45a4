"""Checks a declared agent (or agent type) against what the running executors offer.

A model whose provider no executor has (`opneai/gpt-4o-mini`), a provider no executor can use (no
API key), a tool no executor offers: each would fail only when the agent is first chatted with.
The registry says so when the agent is declared, as warnings that name the fix; it does not
refuse, because the pool changes (an executor with the missing provider or tool may be on its
way, and agents are often declared before executors start).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from agentmesh.registry.models import Executor

MOCK = "mock"
# The provider a model name without one (`gpt-4o-mini`) runs on.
DEFAULT_PROVIDER = "openai"


def provider_of(model: str) -> str:
    """`openai/gpt-4o-mini` → openai; `mock` and `mock/...` → mock; `gpt-4o-mini` → openai."""
    provider, slash, _ = model.partition("/")
    return provider if slash or provider == MOCK else DEFAULT_PROVIDER


def declaration_warnings(
    *,
    models: Iterable[str],
    tools: Sequence[str],
    scripted: bool,
    executors: Sequence[Executor],
) -> list[str]:
    """What would keep an agent with these models and tools from running on today's pool.
    `scripted` agents (with mock responses) need no model provider."""
    if not executors:
        return ["no executor is running: models and tools will be checked when one reports in"]
    return [
        *([] if scripted else _model_warnings(models, executors)),
        *_tool_warnings(tools, executors),
    ]


def _model_warnings(models: Iterable[str], executors: Sequence[Executor]) -> list[str]:
    problems: dict[str, list[str]] = {}  # provider → what each executor that has it says
    for executor in executors:
        for provider in executor.model_providers:
            problems.setdefault(provider.name, []).append(provider.problem)
    known = sorted({MOCK, *problems})
    warnings: list[str] = []
    for model in dict.fromkeys(m for m in models if m):
        provider = provider_of(model)
        if provider == MOCK:
            continue
        if provider not in problems:
            warnings.append(
                f"model {model!r}: no running executor has the provider {provider!r}"
                f"{_suggestion(provider, known)} (they have: {', '.join(known)}); fix the name, or "
                f"configure the provider on the executors (AGENTMESH_EXECUTOR_PROVIDERS)"
            )
        elif all(problems[provider]):
            warnings.append(f"model {model!r}: {problems[provider][0]}")
    return warnings


def _tool_warnings(tools: Sequence[str], executors: Sequence[Executor]) -> list[str]:
    offered = sorted({tool for executor in executors for tool in executor.tools})
    return [
        f"tool {tool!r} is not offered by any running executor{_suggestion(tool, offered)}"
        f" (they offer: {', '.join(offered) or 'none'}); MCP tools come from the agent type's "
        f"mcp_servers, not from tools"
        for tool in dict.fromkeys(tools)
        if tool not in offered
    ]


def _suggestion(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f" — did you mean {close[0]!r}?" if close else ""
