"""Alembic environment of the memory service: its tables, its own version table."""

from agentmesh.memory.store import metadata
from agentmesh.runtime.database import run_migrations

run_migrations(metadata)
