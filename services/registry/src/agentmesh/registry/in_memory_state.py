"""What the in-memory registry store holds: immutable domain models in dicts, with each create's
request id, the runs in flight, their leases, the sessions' turns and suspended runs' requests for
input. The in-memory counterpart of
`tables.py`: the store (`store/in_memory.py`) and each resource's in-memory store part work on it,
so it sits below both."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from agentmesh.registry.models import (
    Agent,
    AgentType,
    AgentVersion,
    ApiKey,
    Credentials,
    Executor,
    Invitation,
    LoginState,
    Project,
    RefreshToken,
    RegisteredMcpServer,
    RunKey,
)
from agentmesh.registry.remote_agents.models import RemoteAgent
from agentmesh.registry.runs.input_models import InputRequest
from agentmesh.registry.schedules.models import Schedule, ScheduleFiring
from agentmesh.registry.webhooks.models import Webhook, WebhookDelivery

V = TypeVar("V")


@dataclass
class Stored(Generic[V]):
    """A stored value with the request id it was created with (None when the create had none)."""

    value: V
    request_id: str | None = None


def first(stored: Iterable[Stored[V]], matches: Callable[[Stored[V]], bool]) -> V | None:
    """The value of the first stored item that matches, None when none does."""
    return next((s.value for s in stored if matches(s)), None)


@dataclass
class State:
    """The whole store; a write works on a copy (the containers copied, the values frozen)."""

    users: dict[str, Credentials] = field(default_factory=dict)
    refresh_tokens: dict[str, RefreshToken] = field(default_factory=dict)
    agent_types: dict[str, Stored[AgentType]] = field(default_factory=dict)
    projects: dict[str, Stored[Project]] = field(default_factory=dict)
    agents: dict[str, Stored[Agent]] = field(default_factory=dict)
    runs: set[tuple[str, str]] = field(default_factory=set)
    executors: dict[str, Executor] = field(default_factory=dict)
    mcp_servers: dict[str, tuple[RegisteredMcpServer, str | None]] = field(default_factory=dict)
    api_keys: dict[str, ApiKey] = field(default_factory=dict)
    remote_agents: dict[str, RemoteAgent] = field(default_factory=dict)
    # Runs' leases, orphaned ones included (those are no longer in `runs`).
    leases: dict[RunKey, StoredLease] = field(default_factory=dict)
    # Session turns in the order they were taken (double texting).
    turns: list[SessionTurn] = field(default_factory=list)
    # Suspended runs' requests for a person's input, by id.
    input_requests: dict[str, InputRequest] = field(default_factory=dict)
    # Parked runs' links to the suspended runs below them they wait on (`runs/run_waits.py`).
    run_waits: dict[RunKey, frozenset[str]] = field(default_factory=dict)
    # Agents' versions in number order, by agent id; the version each session's runs of an agent
    # use, by (agent id, session id), with the agent's project.
    agent_versions: dict[str, list[AgentVersion]] = field(default_factory=dict)
    session_versions: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    # Failed sign-ins by throttle key; invitations to register by id.
    sign_in_failures: dict[str, LoginState] = field(default_factory=dict)
    invitations: dict[str, Invitation] = field(default_factory=dict)
    # Tokens a project's finished runs used, by (project id, YYYY-MM-DD).
    project_tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    # Webhook subscriptions by id, and their outbox of deliveries by id.
    webhooks: dict[str, Webhook] = field(default_factory=dict)
    webhook_deliveries: dict[str, WebhookDelivery] = field(default_factory=dict)

    # Schedules and their firings, by id.
    schedules: dict[str, Schedule] = field(default_factory=dict)
    schedule_firings: dict[str, ScheduleFiring] = field(default_factory=dict)

    def in_flight(self, run: RunKey) -> bool:
        return run in self.runs or run in self.leases


@dataclass(frozen=True)
class StoredLease:
    session_id: str
    executor_id: str
    expires_at: datetime
    orphaned: bool = False
    suspended: bool = False  # parked while it waits for a person's input
    cancelled_by: str = ""  # cancelled while it waited: who, and why


@dataclass(frozen=True)
class SessionTurn:
    session_id: str
    run: RunKey
    interrupted: bool = False
