"""Rows to domain models and back, written once for every way a row arrives: an ORM row, or the
columns of a text statement (whose names may carry a prefix, as in the one-query resolve).

Domain models are pydantic, so a row becomes one by validation (`from_attributes` for ORM rows):
the enum and nested-model fields (`status`, `kind`, `config`, `mcp_servers`) convert on the way,
and the field list is the model's own, never repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from agentmesh.registry.models import Agent, AgentType

M = TypeVar("M", bound=BaseModel)


def from_row(model: type[M], row: object) -> M:
    """The domain model of an ORM row (columns the model does not have, such as `request_id`,
    stay behind)."""
    return model.model_validate(row, from_attributes=True)


def from_columns(model: type[M], values: Mapping[str, Any], prefix: str = "") -> M:
    """The domain model of a text statement's columns named `prefix + field`."""
    return model.model_validate({field: values[prefix + field] for field in model.model_fields})


def fields_of(model: type[BaseModel]) -> tuple[str, ...]:
    """The columns a text statement selects to build `model`: the model's fields."""
    return tuple(model.model_fields)


def agent_type_values(agent_type: AgentType) -> dict[str, Any]:
    """An agent type as column values: JSON columns as plain data, times as datetimes."""
    values = agent_type.model_dump(mode="json", exclude={"created_at", "updated_at"})
    values["created_at"] = agent_type.created_at
    values["updated_at"] = agent_type.updated_at
    return values


def agent_values(agent: Agent) -> dict[str, Any]:
    """An agent as column values: the status as its string, the config without unset overrides."""
    values = agent.model_dump(exclude={"config"})
    values["status"] = agent.status.value
    values["config"] = agent.config.model_dump(mode="json", exclude_none=True)
    return values
