"""The registry's hand-written SQL, with what differs between PostgreSQL and SQLite kept here:
run bookkeeping (start and finish a run) and the one-query resolve of an agent. Everything else
the SQL store does goes through the ORM, which hides the dialects."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from agentmesh.registry.agents.lifecycle import (
    BLOCKED_STATUSES_SQL,
    RUN_FINISHED_SQL,
    RUN_RESUMED_SQL,
    RUN_STARTED_SQL,
    RUN_SUSPENDED_SQL,
    RUN_UNPARKED_SQL,
)
from agentmesh.registry.mappers import fields_of, from_columns
from agentmesh.registry.models import Agent, AgentType, Project
from agentmesh.registry.store.interface import RunChange
from agentmesh.registry.tables import AgentRow, AgentTypeRow, Base, ProjectRow, UtcDateTime

# --- Run bookkeeping: the hottest path (every run starts and finishes here), so no ORM ----------
#
# On PostgreSQL each of start and finish is one statement, run outside an explicit transaction
# (one round trip): a CTE locks the visible agent row, inserts or deletes the run row, and updates
# the agent only when that changed something; the result is the agent (as changed, or as locked)
# with a flag saying which. Under READ COMMITTED the lock serializes concurrent runs of one agent
# and the UPDATE re-reads the newest row version, so every run is counted once. SQLite has no
# data-modifying CTEs: there the same statements run as two in one `BEGIN IMMEDIATE` transaction
# (in process, no round trips). Text, because the dialects' `ON CONFLICT` constructs are not
# cached compiled and this runs twice per run.

_AGENT_FIELDS = fields_of(Agent)
_AGENT_TYPES: dict[str, Any] = {
    "project_updated_at": UtcDateTime,
    "type_updated_at": UtcDateTime,
    "config": sa.JSON,
    "public": sa.Boolean,
    "tasks_completed": sa.BigInteger,
    "tokens_used": sa.BigInteger,
    "cost": sa.Float,
    "runs_in_flight": sa.Integer,
    "runs_waiting": sa.Integer,
    "created_at": UtcDateTime,
    "last_activity_at": UtcDateTime,
    "changed": sa.Boolean,
}
_BLOCKED = BLOCKED_STATUSES_SQL
_VISIBLE_AGENT = (
    "FROM agents JOIN projects ON projects.id = agents.project_id "
    "JOIN agent_types ON agent_types.id = agents.agent_type_id "
    "WHERE agents.id = :agent_id AND (:everything OR projects.owner_id = :user_id)"
)
# When the agent's project and type last changed: with its config, they make its spec's revision.
_SPEC_TIMES = "projects.updated_at AS project_updated_at, agent_types.updated_at AS type_updated_at"
_SPEC_TIME_FIELDS = "target.project_updated_at, target.type_updated_at"
_START_SET = RUN_STARTED_SQL
_FINISH_SET = RUN_FINISHED_SQL


def _columns(prefix: str) -> str:
    return ", ".join(f"{prefix}{field}" for field in _AGENT_FIELDS)


def _run_statement(sql: str, *, result: bool = True, **types: Any) -> sa.TextClause:
    params = {
        "agent_id": sa.String,
        "run_id": sa.String,
        "user_id": sa.String,
        "everything": sa.Boolean,
        "now": UtcDateTime,
        **types,
    }
    statement = sa.text(sql).bindparams(
        *(sa.bindparam(name, type_=kind) for name, kind in params.items() if f":{name}" in sql)
    )
    if not result:
        return statement
    return statement.columns(  # type: ignore[return-value]
        *(
            sa.column(field, _AGENT_TYPES.get(field, sa.String))
            for field in (*_AGENT_FIELDS, "changed", "project_updated_at", "type_updated_at")
        )
    )


# --- The webhooks' outbox: a run's start and end enqueue their event for each of the project's
# webhooks that asks for it (webhooks/), in the statement (PostgreSQL) or the transaction (SQLite)
# that records the run, so an event is enqueued exactly when its change is made. A delivery's id is
# `delivery_id`'s (webhooks/models.py); `events` is comma-separated (tables.py). A2A push
# notification configs are webhooks bound to one run (`run_id`), enqueued for that run only.

_DELIVERY_COLUMNS = (
    "id, webhook_id, project_id, event, agent_id, run_id, session_id, data, created_at, state, "
    "attempts, next_attempt_at, last_attempt_at, last_status_code, last_error"
)


def _outbox(event: str, session: str, source: str, data: str = "''") -> str:
    """The insert of the deliveries of `event` (an SQL expression), the run's session being
    `session`, the project's webhooks joined to `source` (which names the run's project); `data`
    the event's more (an SQL expression: an end's outcome, webhooks/models.py `RunOutcome`)."""
    return (
        f"INSERT INTO webhook_deliveries ({_DELIVERY_COLUMNS}) "
        f"SELECT webhooks.id || ':' || {event} || ':' || :run_id, webhooks.id, webhooks.project_id, "
        f"{event}, :agent_id, :run_id, {session}, {data}, :now, 'pending', 0, :now, NULL, 0, '' "
        f"FROM webhooks JOIN {source} "
        f"WHERE (',' || webhooks.events || ',') LIKE '%,' || {event} || ',%' "
        # A task's push notification config follows its own run only.
        "AND webhooks.run_id IN ('', :run_id) ON CONFLICT DO NOTHING"
    )


_PG_RUN_PROJECT = "target ON webhooks.project_id = target.project_id CROSS JOIN run"
_ENDED = "CASE WHEN :completed = 1 THEN 'run.completed' ELSE 'run.failed' END"


def _pg_run(modify: str, set_clause: str, event: str, more: str = "''", **types: Any) -> sa.TextClause:
    return _run_statement(
        f"WITH target AS (SELECT {_columns('agents.')}, {_SPEC_TIMES} {_VISIBLE_AGENT} "
        "FOR UPDATE OF agents), "
        f"run AS ({modify} RETURNING agent_runs.agent_id, agent_runs.session_id), "
        f"changed AS (UPDATE agents SET {set_clause} FROM run WHERE agents.id = run.agent_id "
        f"RETURNING {_columns('agents.')}), "
        # Data-modifying CTEs run whether or not the query reads them.
        f"outbox AS ({_outbox(event, 'run.session_id', _PG_RUN_PROJECT, more)}) "
        f"SELECT {_columns('changed.')}, true AS changed, {_SPEC_TIME_FIELDS} FROM changed, target "
        f"UNION ALL SELECT {_columns('target.')}, false AS changed, {_SPEC_TIME_FIELDS} FROM target "
        "WHERE NOT EXISTS (SELECT FROM changed)",
        **types,
    )


_USAGE_TYPES: dict[str, Any] = {"completed": sa.Integer, "tokens_used": sa.BigInteger, "cost": sa.Float}
_END_TYPES: dict[str, Any] = {**_USAGE_TYPES, "data": sa.String}

_LEASE_TYPES: dict[str, Any] = {
    "session_id": sa.String,
    "executor_id": sa.String,
    "lease_expires_at": UtcDateTime,
}
_RUN_COLUMNS = "agent_id, run_id, started_at, session_id, executor_id, lease_expires_at"
_RUN_VALUES = ":run_id, :now, :session_id, :executor_id, :lease_expires_at"

PG_START_RUN = _pg_run(
    f"INSERT INTO agent_runs ({_RUN_COLUMNS}) "
    f"SELECT id, {_RUN_VALUES} FROM target WHERE status NOT IN {_BLOCKED} ON CONFLICT DO NOTHING",
    _START_SET,
    "'run.started'",
    **_LEASE_TYPES,
)
PG_FINISH_RUN = _pg_run(
    "DELETE FROM agent_runs USING target "
    # An orphaned run already stopped counting when its lease expired (runs/leases.py).
    "WHERE agent_runs.agent_id = target.id AND agent_runs.run_id = :run_id AND NOT agent_runs.orphaned",
    _FINISH_SET.format(greatest="GREATEST"),
    _ENDED,
    ":data",
    **_END_TYPES,
)
SQLITE_ADD_RUN = _run_statement(
    f"INSERT INTO agent_runs ({_RUN_COLUMNS}) "
    f"SELECT agents.id, {_RUN_VALUES} {_VISIBLE_AGENT} AND agents.status NOT IN {_BLOCKED} "
    "ON CONFLICT DO NOTHING",
    result=False,
    **_LEASE_TYPES,
)
SQLITE_REMOVE_RUN = _run_statement(
    "DELETE FROM agent_runs WHERE agent_runs.agent_id = :agent_id AND agent_runs.run_id = :run_id "
    f"AND NOT agent_runs.orphaned AND EXISTS (SELECT 1 {_VISIBLE_AGENT})",
    result=False,
)
SQLITE_START_UPDATE = _run_statement(f"UPDATE agents SET {_START_SET} WHERE id = :agent_id", result=False)
SQLITE_FINISH_UPDATE = _run_statement(
    f"UPDATE agents SET {_FINISH_SET.format(greatest='MAX')} WHERE id = :agent_id",
    result=False,
    **_USAGE_TYPES,
)
# A run orphaned by its expired lease leaves its agent as a failed finish would (runs/leases.py).
FINISH_UPDATE = {
    "postgresql": _run_statement(
        f"UPDATE agents SET {_FINISH_SET.format(greatest='GREATEST')} WHERE id = :agent_id",
        result=False,
        **_USAGE_TYPES,
    ),
    "sqlite": SQLITE_FINISH_UPDATE,
}
# An orphan its taker resumes counts in flight again, as a start would (runs/leases.py); a paused or
# terminated agent keeps its status.
RESUME_UPDATE = _run_statement(f"UPDATE agents SET {RUN_RESUMED_SQL} WHERE id = :agent_id", result=False)
# A run parked to wait for a person's input joins the agent's waiting runs (after FINISH_UPDATE when it
# was in flight), and leaves them when it is handed to an executor to resume (runs/input_store.py).
SUSPEND_UPDATE = _run_statement(f"UPDATE agents SET {RUN_SUSPENDED_SQL} WHERE id = :agent_id", result=False)
UNPARK_UPDATE = {
    dialect: _run_statement(
        f"UPDATE agents SET {RUN_UNPARKED_SQL.format(greatest=greatest)} WHERE id = :agent_id", result=False
    )
    for dialect, greatest in (("postgresql", "GREATEST"), ("sqlite", "MAX"))
}
# SQLite enqueues a run's event in the transaction that records it, once it changed something;
# closing an orphan enqueues its end so on both databases (runs/lease_store.py).
RUN_OUTBOX = _run_statement(
    _outbox(
        ":event",
        ":session_id",
        "agents ON agents.id = :agent_id AND webhooks.project_id = agents.project_id",
        ":data",
    ),
    result=False,
    event=sa.String,
    session_id=sa.String,
    data=sa.String,
)
# The session of a run about to end: the run's row is gone once its end is recorded.
SQLITE_RUN_SESSION = sa.text(
    "SELECT session_id FROM agent_runs WHERE agent_id = :agent_id AND run_id = :run_id"
).bindparams(sa.bindparam("agent_id", type_=sa.String), sa.bindparam("run_id", type_=sa.String))
SQLITE_VISIBLE_AGENT = _run_statement(
    f"SELECT {_columns('agents.')}, :changed AS changed, {_SPEC_TIMES} {_VISIBLE_AGENT}",
    changed=sa.Boolean,
)


def run_change(row: sa.Row[Any] | None) -> RunChange | None:
    """The RunChange a start or finish statement returns, None when the agent was not visible."""
    if row is None:
        return None
    values = row._mapping
    return RunChange(
        agent=from_columns(Agent, values),
        changed=bool(values["changed"]),
        project_updated_at=values["project_updated_at"],
        type_updated_at=values["type_updated_at"],
    )


# --- ResolveAgent: once per run, so one text statement outside a transaction -------------------
#
# Project, agent and type in one round trip (and one snapshot): the project by slug, LEFT JOINed
# to its agent of that id, slug or name and that agent's type, so a missing agent still returns the project
# (the caller tells "project not found" from "agent not found").

_PROJECT_FIELDS = fields_of(Project)
_TYPE_FIELDS = fields_of(AgentType)


def _resolve_columns() -> list[sa.ColumnClause[Any]]:
    def typed(table: type[Base], field: str) -> Any:
        return table.__table__.c[field].type

    return [
        *(sa.column(f"p_{field}", typed(ProjectRow, field)) for field in _PROJECT_FIELDS),
        *(sa.column(f"a_{field}", typed(AgentRow, field)) for field in _AGENT_FIELDS),
        *(sa.column(f"t_{field}", typed(AgentTypeRow, field)) for field in _TYPE_FIELDS),
    ]


RESOLVE = (
    sa.text(
        f"SELECT {', '.join(f'projects.{field} AS p_{field}' for field in _PROJECT_FIELDS)}, "
        f"{', '.join(f'agents.{field} AS a_{field}' for field in _AGENT_FIELDS)}, "
        f"{', '.join(f'agent_types.{field} AS t_{field}' for field in _TYPE_FIELDS)} "
        "FROM projects "
        "LEFT JOIN agents ON agents.project_id = projects.id "
        "AND (agents.id = :agent_name OR agents.slug = :agent_name OR agents.name = :agent_name) "
        "LEFT JOIN agent_types ON agent_types.id = agents.agent_type_id "
        "WHERE projects.slug = :project_slug "
        # Id, then slug, then exact name: what `get_agent(project_ref=…)` prefers.
        "ORDER BY CASE WHEN agents.id = :agent_name THEN 0 WHEN agents.slug = :agent_name THEN 1 "
        "ELSE 2 END LIMIT 1"
    )
    .bindparams(sa.bindparam("project_slug", type_=sa.String), sa.bindparam("agent_name", type_=sa.String))
    .columns(*_resolve_columns())
)


def resolved(row: sa.Row[Any] | None) -> tuple[Project | None, Agent | None, AgentType | None]:
    """What RESOLVE returned: the project, its agent and the agent's type, each None if missing."""
    if row is None:
        return None, None, None
    values = row._mapping
    project = from_columns(Project, values, "p_")
    if values["a_id"] is None:
        return project, None, None
    agent = from_columns(Agent, values, "a_")
    if values["t_id"] is None:
        return project, agent, None
    return project, agent, from_columns(AgentType, values, "t_")
