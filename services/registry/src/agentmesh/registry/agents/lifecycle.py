"""An agent's lifecycle (DESIGN §3) as pure functions of its record: idle ⇄ working (while runs
are in flight), waiting (no run in flight, and a run suspended for a person's input: DESIGN §12),
idle|working|waiting → paused → back, any → terminated; and what an executor runs, the
agent's type with its config overrides applied (`resolve`), with the revision that tells when that
changed.

The run bookkeeping rules live here only, in two forms side by side: as functions (the in-memory
store calls them) and as the SQL `SET` clauses the SQL store runs (`store/statements.py`), where
each run's start and end must change the agent in the statement that records the run so
concurrent runs keep every count. Neither store states a rule of its own; change one form, change
the other, and the store contract suite holds both stores to the same answers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import TypeVar

from agentmesh.registry.errors import AgentPaused, AgentTerminated, InvalidTransition
from agentmesh.registry.models import (
    DEFAULT_DOUBLE_TEXTING,
    DEFAULT_INPUT_EXPIRY_SECONDS,
    Agent,
    AgentSpec,
    AgentStatus,
    AgentType,
    Project,
)
from agentmesh.registry.validation import DEFAULT_MAX_STEPS

T = TypeVar("T")

# No run starts for an agent in these (a resumed orphan still counts, and leaves its status be).
BLOCKED_STATUSES = (AgentStatus.PAUSED, AgentStatus.TERMINATED)


def takes_runs(agent: Agent) -> bool:
    """Whether a run may start for the agent (`run_started` refuses one that may not)."""
    return agent.status not in BLOCKED_STATUSES


def paused(agent: Agent, now: datetime) -> Agent:
    if agent.status not in (AgentStatus.IDLE, AgentStatus.WORKING, AgentStatus.WAITING):
        raise InvalidTransition(f"cannot pause an agent that is {agent.status.value}")
    return agent.model_copy(update={"status": AgentStatus.PAUSED, "last_activity_at": now})


def resumed(agent: Agent, now: datetime) -> Agent:
    if agent.status is not AgentStatus.PAUSED:
        raise InvalidTransition(f"cannot resume an agent that is {agent.status.value}")
    # Runs that were in flight or suspended when it was paused may still be going or waiting.
    return agent.model_copy(update={"status": _status_by_runs(agent), "last_activity_at": now})


def _status_by_runs(agent: Agent) -> AgentStatus:
    """What an agent that takes runs is by its runs: working while one is in flight, else waiting
    while one is suspended, else idle."""
    if agent.runs_in_flight:
        return AgentStatus.WORKING
    return AgentStatus.WAITING if agent.runs_waiting else AgentStatus.IDLE


def terminated(agent: Agent, now: datetime) -> Agent:
    if agent.status is AgentStatus.TERMINATED:
        return agent  # terminating is idempotent
    return agent.model_copy(update={"status": AgentStatus.TERMINATED, "last_activity_at": now})


def retired(agent: Agent) -> Agent:
    """A terminated agent that gave its name and slug up to a new agent of the same ones: it keeps
    its id, and names that say what it was (unique in the project by its id)."""
    mark = agent.id.replace("-", "")[:12]
    return agent.model_copy(
        update={
            "name": f"{agent.name[:70]} (terminated {mark})",
            "slug": f"{agent.slug[:38].rstrip('-')}-terminated-{mark}",
        }
    )


def run_started(agent: Agent, now: datetime) -> Agent:
    if agent.status is AgentStatus.PAUSED:
        raise AgentPaused(f"agent {agent.name!r} is paused")
    if agent.status is AgentStatus.TERMINATED:
        raise AgentTerminated(f"agent {agent.name!r} is terminated")
    return run_resumed(agent, now)


def run_resumed(agent: Agent, now: datetime) -> Agent:
    """A run counted in flight again (an orphaned run its taker resumes): as a start, except that a
    paused or terminated agent keeps its status."""
    return agent.model_copy(
        update={
            "status": AgentStatus.WORKING if takes_runs(agent) else agent.status,
            "runs_in_flight": agent.runs_in_flight + 1,
            "last_activity_at": now,
        }
    )


def run_finished(agent: Agent, now: datetime, *, completed: bool, tokens_used: int, cost: float) -> Agent:
    runs = max(agent.runs_in_flight - 1, 0)
    status = agent.status
    if status is AgentStatus.WORKING and runs == 0:
        status = AgentStatus.WAITING if agent.runs_waiting else AgentStatus.IDLE
    return agent.model_copy(
        update={
            "status": status,
            "runs_in_flight": runs,
            "tasks_completed": agent.tasks_completed + int(completed),
            "tokens_used": agent.tokens_used + tokens_used,
            "cost": agent.cost + cost,
            "last_activity_at": now,
        }
    )


def run_suspended(agent: Agent, now: datetime, *, in_flight: bool) -> Agent:
    """A run parked to wait for a person's input: out of the runs in flight when it counted there
    (as a failed finish, `in_flight`; an orphan taken over and not resumed yet did not), and one
    more waiting. An idle agent is then waiting; a paused or terminated one keeps its status."""
    if in_flight:
        agent = run_finished(agent, now, completed=False, tokens_used=0, cost=0.0)
    status = AgentStatus.WAITING if agent.status is AgentStatus.IDLE else agent.status
    return agent.model_copy(
        update={"status": status, "runs_waiting": agent.runs_waiting + 1, "last_activity_at": now}
    )


def run_unparked(agent: Agent, now: datetime) -> Agent:
    """A suspended run handed to an executor to resume (its requests answered or expired): one
    fewer waiting; an agent left with none is idle until the run is resumed (counted in flight)."""
    waiting = max(agent.runs_waiting - 1, 0)
    status = agent.status
    if status is AgentStatus.WAITING and waiting == 0:
        status = AgentStatus.IDLE
    return agent.model_copy(update={"status": status, "runs_waiting": waiting, "last_activity_at": now})


# The same rules in SQL, over the `agents` row and the parameters :now (and, to finish, :completed,
# :tokens_used, :cost); `{greatest}` is the dialect's two-argument maximum (GREATEST, MAX).
BLOCKED_STATUSES_SQL = "(" + ", ".join(f"'{status.value}'" for status in BLOCKED_STATUSES) + ")"
RUN_STARTED_SQL = (
    f"status = '{AgentStatus.WORKING.value}', runs_in_flight = agents.runs_in_flight + 1, "
    "last_activity_at = :now"
)
RUN_RESUMED_SQL = (
    f"status = CASE WHEN agents.status IN {BLOCKED_STATUSES_SQL} THEN agents.status "
    f"ELSE '{AgentStatus.WORKING.value}' END, runs_in_flight = agents.runs_in_flight + 1, "
    "last_activity_at = :now"
)
RUN_FINISHED_SQL = (
    f"status = CASE WHEN agents.status = '{AgentStatus.WORKING.value}' AND agents.runs_in_flight <= 1 "
    f"THEN CASE WHEN agents.runs_waiting > 0 THEN '{AgentStatus.WAITING.value}' "
    f"ELSE '{AgentStatus.IDLE.value}' END ELSE agents.status END, "
    "runs_in_flight = {greatest}(agents.runs_in_flight - 1, 0), "
    "tasks_completed = agents.tasks_completed + :completed, "
    "tokens_used = agents.tokens_used + :tokens_used, cost = agents.cost + :cost, last_activity_at = :now"
)
# `run_suspended` after its finish part (RUN_FINISHED_SQL, when the run was in flight).
RUN_SUSPENDED_SQL = (
    f"status = CASE WHEN agents.status = '{AgentStatus.IDLE.value}' THEN '{AgentStatus.WAITING.value}' "
    "ELSE agents.status END, runs_waiting = agents.runs_waiting + 1, last_activity_at = :now"
)
RUN_UNPARKED_SQL = (
    f"status = CASE WHEN agents.status = '{AgentStatus.WAITING.value}' AND agents.runs_waiting <= 1 "
    f"THEN '{AgentStatus.IDLE.value}' ELSE agents.status END, "
    "runs_waiting = {greatest}(agents.runs_waiting - 1, 0), last_activity_at = :now"
)


def spec_revision(agent: Agent, project_updated_at: datetime, type_updated_at: datetime) -> str:
    """Changes whenever what ResolveAgent answers for the agent may: its config overrides, its
    type, or its project (the slug) changed. Status and usage are not part of a spec."""
    source = json.dumps(
        [
            agent.agent_type_id,
            agent.config.model_dump(mode="json"),
            project_updated_at.isoformat(),
            type_updated_at.isoformat(),
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.blake2b(source.encode(), digest_size=8).hexdigest()


def resolve(
    agent: Agent, agent_type: AgentType, project: Project, project_agents: Mapping[str, str]
) -> AgentSpec:
    """The agent's type with its config overrides applied: what an executor runs. Sub-agents and
    network access may name agents by slug or by exact name; the spec names them by slug
    (`project_agents` maps the project's slugs to names) and carries their names beside."""
    config = agent.config

    def pick(override: T | None, default: T) -> T:
        return default if override is None else override

    slug_of = {name: slug for slug, name in project_agents.items()} | {slug: slug for slug in project_agents}
    sub_agents = [slug_of.get(ref, ref) for ref in pick(config.sub_agents, agent_type.sub_agents)]
    network_access = [slug_of.get(ref, ref) for ref in pick(config.network_access, [])]

    return AgentSpec(
        agent=agent,
        project_slug=project.slug,
        kind=agent_type.kind,
        instructions=pick(config.instructions, agent_type.personality_prompt),
        primary_model=pick(config.primary_model, agent_type.primary_model),
        fallback_models=list(agent_type.fallback_models),
        model_params=pick(config.model_params, agent_type.model_params),
        tools=pick(config.tools, agent_type.tools),
        mcp_servers=list(agent_type.mcp_servers),
        sub_agents=sub_agents,
        network_access=network_access,
        max_steps=pick(config.max_steps, agent_type.max_steps or DEFAULT_MAX_STEPS),
        max_iterations=pick(config.max_iterations, agent_type.max_iterations),
        mock_responses=pick(config.mock_responses, []),
        double_texting=pick(config.double_texting, DEFAULT_DOUBLE_TEXTING),
        tool_permissions=dict(agent_type.tool_permissions),
        agent_tool_permissions=dict(config.tool_permissions or {}),
        project_tool_permissions=dict(project.tool_permissions),
        input_expiry_seconds=agent_type.input_expiry_seconds or DEFAULT_INPUT_EXPIRY_SECONDS,
        delegation_limits=agent_type.delegation_limits,
        context_budget_tokens=agent_type.context_budget_tokens,
        compaction_model=agent_type.compaction_model,
        compaction_prompt=agent_type.compaction_prompt,
        run_budget=agent_type.run_budget,
        description=agent_type.description,
        expertise=list(agent_type.expertise),
        revision=spec_revision(agent, project.updated_at, agent_type.updated_at),
        agent_names={
            slug: project_agents[slug] for slug in (*sub_agents, *network_access) if slug in project_agents
        },
    )
