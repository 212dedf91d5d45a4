"""Alembic environment of the registry's migrations (run through `runtime.database.upgrade`)."""

from agentmesh.registry.tables import Base
from agentmesh.runtime.database import run_migrations

run_migrations(Base.metadata)
