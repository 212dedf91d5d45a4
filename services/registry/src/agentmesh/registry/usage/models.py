"""The cost ledger's domain types: an entry (one run's calls of one model) and a summary's
groups. Kept apart from the registry's other models: only the ledger and its store use them."""

from __future__ import annotations

import enum
from datetime import datetime

from pydantic import BaseModel, ConfigDict


class UsageDimension(enum.StrEnum):
    """What a summary may group by; each names the entry's field it groups on."""

    AGENT = "agent"
    USER = "user"
    MODEL = "model"
    SESSION = "session"
    DAY = "day"


class UsageEntry(BaseModel):
    """What one run's calls of one model used: a row of the ledger. `cost` is what the priced
    calls cost; `cost_known` is False when the model had no price (the cost is then unknown)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project_id: str
    agent_id: str
    agent: str
    user_id: str
    session_id: str
    run_id: str
    model: str
    day: str  # UTC, YYYY-MM-DD
    calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost: float
    cost_known: bool
    recorded_at: datetime


class UsageGroup(BaseModel):
    """The sum of a group of entries; the keys of the dimensions not grouped by are empty.
    `unpriced_models`: the models of its entries whose cost is unknown (none: the cost is known)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str = ""
    agent: str = ""
    user_id: str = ""
    model: str = ""
    session_id: str = ""
    day: str = ""
    runs: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost: float = 0.0
    unpriced_models: tuple[str, ...] = ()


class UsageSummary(BaseModel):
    """A summary: its groups in order (at most the limit asked; `truncated` when there were more)
    and the total of every entry counted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    groups: list[UsageGroup]
    total: UsageGroup
    truncated: bool


class ModelUsageReport(BaseModel):
    """What a run's calls of one model used, as its executor reports them at the run's end."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    cost: float = 0.0
    cost_known: bool = False
