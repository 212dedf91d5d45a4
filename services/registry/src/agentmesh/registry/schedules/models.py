"""A schedule and its firings, as the registry's rules and store parts hold them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agentmesh.registry.models import Model, User

SESSION_POLICIES = ("new", "continue")
MISSED_POLICIES = ("skip", "run_once")
OVERLAP_POLICIES = ("skip", "queue", "cancel_previous")

# A firing's outcomes: claimed and its run starting, waiting for the previous run (overlap
# `queue`), its run going, and the final ones.
PENDING = "pending"
QUEUED = "queued"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
SKIPPED_OVERLAP = "skipped_overlap"
SKIPPED_MISSED = "skipped_missed"
CANCELLED = "cancelled"
OPEN = (PENDING, QUEUED, RUNNING)
# What a firer may record: its run started, then how it ended.
RECORDED = (RUNNING, COMPLETED, FAILED, CANCELLED)


class Schedule(Model):
    """An agent of a project run on a cron expression in a time zone (see `registry.py`)."""

    id: str
    project_id: str
    name: str
    agent: str
    message: str
    cron: str
    time_zone: str = "UTC"
    session_policy: str = "new"
    missed_policy: str = "skip"
    overlap_policy: str = "skip"
    enabled: bool = True
    next_fire_at: datetime | None = None
    session_id: str = ""
    created_by: str
    created_at: datetime


class ScheduleFiring(Model):
    """One due time of a schedule and what became of it."""

    id: str
    schedule_id: str
    due_at: datetime
    outcome: str
    run_id: str = ""
    session_id: str = ""
    error: str = ""
    fired_at: datetime
    ended_at: datetime | None = None


@dataclass(frozen=True)
class ClaimedFiring:
    """A firing its claimer now owns, with what starting its run takes."""

    firing: ScheduleFiring
    schedule: Schedule
    project_slug: str
    message: str
    creator: User
