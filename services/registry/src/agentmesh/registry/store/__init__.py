"""Registry storage: the `RegistryStore` interface the rules depend on, and its implementations.

- `interface`: `RegistryStore`, `StoreTransaction` and the values they exchange;
- `tables`: the ORM rows (the schema the migrations build);
- `mappers`: rows to domain models and back, written once;
- `statements`: the hand-written, per-dialect SQL (run bookkeeping, the one-query resolve);
- `sql`: `SqlRegistryStore` on SQLite or PostgreSQL (`leases`: its run leases);
- `in_memory`: `InMemoryRegistryStore`, for unit tests and as the contract's reference.
"""

from agentmesh.registry.store.in_memory import InMemoryRegistryStore
from agentmesh.registry.store.interface import (
    DuplicateRequest,
    OrphanedRun,
    RegistryStore,
    RunChange,
    RunKey,
    RunLease,
    RunLeaseStore,
    StoreTransaction,
    Visibility,
)
from agentmesh.registry.store.sql import SqlRegistryStore
from agentmesh.registry.store.tables import Base

__all__ = [
    "Base",
    "DuplicateRequest",
    "InMemoryRegistryStore",
    "OrphanedRun",
    "RegistryStore",
    "RunChange",
    "RunKey",
    "RunLease",
    "RunLeaseStore",
    "SqlRegistryStore",
    "StoreTransaction",
    "Visibility",
]
