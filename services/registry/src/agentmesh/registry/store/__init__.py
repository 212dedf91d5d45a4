"""Registry storage: the `RegistryStore` interface the rules depend on, and its implementations.

- `interface`: `RegistryStore`, `StoreTransaction` and the values they exchange (exported here);
- `statements`: the hand-written, per-dialect SQL (run bookkeeping, the one-query resolve);
- `sql`: `SqlRegistryStore` on SQLite or PostgreSQL;
- `in_memory`: `InMemoryRegistryStore`, for unit tests and as the contract's reference.

Each resource keeps its own part of a transaction next to its rules (`agents/store.py`,
`projects/store.py`, `identity/store.py`, `mcp_servers/store.py`, `runs/lease_store.py`, ...); the
ORM rows are `tables.py` and their mapping to domain models `mappers.py`, and what the in-memory
store holds is `in_memory_state.py`. The implementations are imported from their modules, not from
here, so that a resource's store part can be imported on its own without pulling in both stores.
"""

from agentmesh.registry.store.interface import (
    DuplicateRequest,
    InputRequestStore,
    OrphanedRun,
    RegistryStore,
    RunChange,
    RunKey,
    RunLease,
    RunLeaseStore,
    StoreTransaction,
    Visibility,
)

__all__ = [
    "DuplicateRequest",
    "InputRequestStore",
    "OrphanedRun",
    "RegistryStore",
    "RunChange",
    "RunKey",
    "RunLease",
    "RunLeaseStore",
    "StoreTransaction",
    "Visibility",
]
