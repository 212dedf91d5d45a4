"""The registry store's interface: what the rules (`agents/registry.py`, `identity/auth.py`, ...) depend on.

The rules open a transaction — `store.read()` or `store.write()` — and call its methods;
everything done inside one `write()` commits together or not at all. Methods take and return the
domain models of `models.py`; reads return None for what does not exist. Uniqueness (e-mail, slugs,
agent names and slugs per project, request ids) is the store's to enforce, so concurrent writers cannot both
win: a violation raises the matching registry error (`EmailTaken`, `SlugTaken`, `AgentNameTaken`)
or `DuplicateRequest`. Implementations: `sql.SqlRegistryStore`, `in_memory.InMemoryRegistryStore`;
one contract suite (tests/integration/registry/test_store_contract.py) holds both to it.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime

# Part of the store's contract, defined below the stores so each resource's store part raises it.
from agentmesh.registry.agents.store import AgentTransaction
from agentmesh.registry.agents.version_store import AgentVersionTransaction
from agentmesh.registry.errors import DuplicateRequest as DuplicateRequest
from agentmesh.registry.identity.sign_in_store import SignInTransaction
from agentmesh.registry.identity.store import AccountTransaction, ApiKeyTransaction
from agentmesh.registry.mcp_servers.store import McpServerTransaction
from agentmesh.registry.models import Agent, AgentType, PageRequest, Project, RunKey, Slice
from agentmesh.registry.projects.store import ProjectTransaction
from agentmesh.registry.remote_agents.store import RemoteAgentTransaction
from agentmesh.registry.runs.executor_store import ExecutorTransaction
from agentmesh.registry.runs.input_models import Cancellation, InputRequest, InputRequestState, InputResponse
from agentmesh.registry.schedules.store import ScheduleTransaction
from agentmesh.registry.usage.store import UsageLedgerStore
from agentmesh.registry.webhooks.outbox_store import WebhookOutboxStore
from agentmesh.registry.webhooks.store import WebhookTransaction


@dataclass(frozen=True)
class Visibility:
    """Whose agents a caller may see: all (superusers) or those of the projects `user_id` owns."""

    user_id: str
    everything: bool


@dataclass(frozen=True)
class RunChange:
    """An agent after a run bookkeeping statement, and whether that statement changed it; with
    when its project and type last changed (what, with its config, makes its spec's revision)."""

    agent: Agent
    changed: bool
    project_updated_at: datetime
    type_updated_at: datetime


@dataclass(frozen=True)
class RunLease:
    """Who holds a run, until when, and where it records its events (who takes it over finds
    them there)."""

    session_id: str
    executor_id: str
    expires_at: datetime


@dataclass(frozen=True)
class OrphanedRun:
    """A run whose lease expired: it no longer counts as in flight, and a live executor has to
    close it in its session's log."""

    agent_id: str
    run_id: str
    session_id: str
    project_id: str
    agent_name: str
    # Its requests for a person's input, when it was suspended: each answered or expired.
    input_requests: tuple[InputRequest, ...] = ()
    # It was parked (suspended): it goes on after input, its own or its runs' below.
    parked: bool = False
    # Cancelled while it waited: who, and why (its taker records a cancelled end, no resume).
    cancelled_by: str = ""


class RunLeaseStore(abc.ABC):
    """The leases executors hold on their runs (DESIGN §5 durability; rules in `runs/leases.py`)."""

    @abc.abstractmethod
    async def renew(self, executor_id: str, runs: Sequence[RunKey], expires_at: datetime) -> list[RunKey]:
        """Extends the leases `executor_id` holds on `runs`; the runs it does not hold (any more)."""

    @abc.abstractmethod
    async def expire(self, now: datetime, *, executor_ids: Collection[str] | None = None) -> int:
        """Orphans every run whose lease expired before `now` (of those executors only, when
        given), atomically with its agent's bookkeeping (as a failed finish: one run fewer in
        flight, idle when it was the last). How many it orphaned."""

    @abc.abstractmethod
    async def claim(
        self, executor_id: str, now: datetime, expires_at: datetime, limit: int
    ) -> list[OrphanedRun]:
        """Hands up to `limit` orphaned runs nobody holds (or whose holder's lease expired too) to
        `executor_id`, leased until `expires_at`, each with its requests for input. A suspended
        run is due once its requests may be settled (`InputRequestStore.suspend`): its pending
        requests past their expiry expire then (`runs/waiting.py`); with none left pending it is
        no longer suspended (one run fewer waiting for its agent) and is handed out, else it
        stays parked until its next pending request's expiry."""

    @abc.abstractmethod
    async def close(self, executor_id: str, runs: Sequence[RunKey], now: datetime) -> int:
        """Forgets orphaned runs `executor_id` holds and has closed (their session's turn is free)
        and releases the runs parked on them, as an end does (`release_waits`): how many of those
        became due."""

    @abc.abstractmethod
    async def resume(
        self, executor_id: str, runs: Sequence[RunKey], now: datetime, expires_at: datetime
    ) -> list[RunKey]:
        """Takes orphaned runs `executor_id` holds back into the books because it resumes them:
        each is no longer orphaned, leased until `expires_at`, and counted in flight again as a
        start counts it (atomically: one run more, the agent `working` unless it is paused or
        terminated), so its end is a normal finish. A run it holds already resumed is left as it
        is (a retry). The runs it does not hold (it must not resume them)."""

    # Session turns (double texting): a user's message's run is a turn of its session. A turn is
    # in flight while its run is (started and not finished, orphaned included): so the order
    # needs no cleanup when a run ends, and a run that vanished blocks nobody.

    @abc.abstractmethod
    async def take_turn(
        self, session_id: str, run: RunKey, *, reject: bool = False, interrupt: bool = False
    ) -> list[RunKey]:
        """Queues the started run as its session's next turn, atomically with reading the turns
        in flight before it (oldest first), which it returns. With `reject`, when there are any,
        the run is not queued; with `interrupt`, they are marked interrupted. Taking the same
        run's turn again (a retry) keeps its place."""

    @abc.abstractmethod
    async def turns_ahead(self, run: RunKey) -> list[RunKey]:
        """The turns of the run's session still in flight before it, oldest first."""

    @abc.abstractmethod
    async def interrupted(self, executor_id: str) -> list[RunKey]:
        """Runs `executor_id` holds whose turn a newer message interrupted."""


class InputRequestStore(abc.ABC):
    """Suspended runs and their requests for a person's input (DESIGN §12; rules in
    `runs/input_requests.py` and `runs/waiting.py`). A suspended run stays a row of the runs in
    flight, parked like an orphan nobody holds — so its session's turn stays taken, the expiry
    sweep leaves it be, and the claim (`RunLeaseStore.claim`) hands it out — but only once its
    lease time has come, which parking sets to its earliest pending request's expiry, and answering
    the last pending request to now."""

    @abc.abstractmethod
    async def suspend(
        self,
        executor_id: str,
        run: RunKey,
        requests: Sequence[InputRequest],
        now: datetime,
        *,
        waits_on: Sequence[str] = (),
    ) -> list[InputRequest]:
        """Stores the run's requests (each as raised by its executor, completed here with the
        run's project, agent slug and session; one already stored keeps its state and response)
        and parks the run, atomically: no executor holds it, it is orphaned (out of the agent's
        runs in flight, as an expired lease leaves it) and suspended (one more run waiting), its
        lease time the earliest expiry of its pending requests, or `now` when none is pending.
        The requests named, as stored. RunNotFound for a run not in flight, RunNotHeld when
        `executor_id` does not hold it — unless it is parked with every request named stored
        already (a retried suspension): then nothing changes. `waits_on`: runs below it (its
        delegated runs) that are suspended themselves; it stays parked until each of those still
        in flight has ended (`release_waits`), whatever its own requests."""

    @abc.abstractmethod
    async def cancel_run(
        self, project_id: str, request_id: str, cancellation: Cancellation, now: datetime
    ) -> tuple[InputRequest, list[RunKey]]:
        """Cancels the waiting run of a pending request — the run at the top of the parked runs
        waiting on the request's run, and its waiting subtree (`runs/cancel_store.py`): the
        request as closed, and the runs cancelled, top first. InputRequestNotFound; for a request
        not pending, why a response to it would be refused (`waiting.refusal`)."""

    @abc.abstractmethod
    async def cancel_agent_runs(
        self, agent_id: str, cancellation: Cancellation, now: datetime
    ) -> list[RunKey]:
        """Cancels every waiting run of the agent, with its waiting subtree; the runs cancelled."""

    @abc.abstractmethod
    async def get_request(self, project_id: str, request_id: str) -> InputRequest | None:
        """The project's request of that id, as stored."""

    @abc.abstractmethod
    async def list_requests(
        self,
        project_id: str,
        page: PageRequest,
        *,
        state: InputRequestState,
        now: datetime,
        session_id: str = "",
    ) -> Slice[InputRequest]:
        """The project's (or the session's) requests in `state` as they stand at `now` (pending
        ones past their expiry count as expired), in (`created_at`, `id`) order, as stored."""

    @abc.abstractmethod
    async def respond(
        self, project_id: str, request_id: str, response: InputResponse, now: datetime
    ) -> InputRequest:
        """Gives a pending request its response, if it is still pending and not past its expiry:
        of concurrent responses exactly one wins. When its run then has no request left pending,
        the run is due to be handed out at once (its lease time `now`). The request, answered.
        InputRequestNotFound; InputAlreadyAnswered naming the first response; InputRequestExpired."""

    @abc.abstractmethod
    async def release_waits(self, run_ids: Sequence[str], now: datetime) -> int:
        """These runs ended: the parked runs that waited on them wait on them no more, and one
        left waiting on nothing — no run below, no pending request of its own — is due at once
        (its lease time `now`). How many became due."""


class StoreTransaction(
    AccountTransaction,
    AgentTransaction,
    AgentVersionTransaction,
    ProjectTransaction,
    McpServerTransaction,
    ApiKeyTransaction,
    RemoteAgentTransaction,
    ScheduleTransaction,
    ExecutorTransaction,
    SignInTransaction,
    WebhookTransaction,
):
    """The operations of one transaction, each resource's in its store part: users', refresh
    tokens' and API keys' in `identity.store`, failed sign-ins' and invitations' in
    `identity.sign_in_store`, agent types' and agents' in `agents.store`, agents'
    versions and sessions' pins to them in `agents.version_store`, projects' in `projects.store`,
    registered MCP servers' in `mcp_servers.store`, remote A2A agents' in `remote_agents.store`,
    the executor pool's in `runs.executor_store`, webhook subscriptions' in `webhooks.store`.
    Reads return None for what does not exist."""


class RegistryStore(abc.ABC):
    """Where the registry keeps its state."""

    @abc.abstractmethod
    def read(self) -> AbstractAsyncContextManager[StoreTransaction]:
        """A transaction that only reads."""

    @abc.abstractmethod
    def write(self) -> AbstractAsyncContextManager[StoreTransaction]:
        """A transaction that commits on success and rolls back on any exception."""

    async def resolve(
        self, project_slug: str, agent_ref: str
    ) -> tuple[Project | None, Agent | None, AgentType | None]:
        """The project of that slug, its agent of that reference (id, slug or exact name, as in
        `get_agent`) and the agent's type, each None when missing (the agent and type also when
        the project is): what ResolveAgent reads."""
        async with self.read() as tx:
            project = await tx.get_project(slug=project_slug)
            if project is None:
                return None, None, None
            agent = await tx.get_agent(project_ref=(project.id, agent_ref))
            if agent is None:
                return project, None, None
            return project, agent, await tx.get_agent_type(type_id=agent.agent_type_id)

    @property
    @abc.abstractmethod
    def leases(self) -> RunLeaseStore:
        """The runs' leases."""

    @property
    @abc.abstractmethod
    def input_requests(self) -> InputRequestStore:
        """Suspended runs and their requests for a person's input."""

    @property
    @abc.abstractmethod
    def usage(self) -> UsageLedgerStore:
        """The cost ledger."""

    @property
    @abc.abstractmethod
    def webhook_outbox(self) -> WebhookOutboxStore:
        """The webhooks' deliveries, as their dispatcher claims and settles them."""

    @abc.abstractmethod
    async def start_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        lease: RunLease | None = None,
    ) -> RunChange | None:
        """Records the run as in flight (with its lease, when given), makes the agent working and
        enqueues `run.started` for the project's webhooks, atomically, unless the agent is paused
        or terminated or the run already is in flight (a retried start). None when the agent
        does not exist or is not visible."""

    @abc.abstractmethod
    async def finish_run(
        self,
        visibility: Visibility,
        agent_id: str,
        run_id: str,
        now: datetime,
        *,
        completed: bool,
        tokens_used: int,
        cost: float,
        cancelled: bool = False,
    ) -> RunChange | None:
        """Forgets the in-flight run, adds its usage and enqueues `run.completed` (or `run.failed`,
        its `outcome` `failed` or, when `cancelled`, `cancelled`) for the project's webhooks and
        the run's push configs, atomically; the agent is idle again when
        it was working and no run is left. Nothing changes when the run was not in flight (a
        retried finish). None when the agent does not exist or is not visible."""
