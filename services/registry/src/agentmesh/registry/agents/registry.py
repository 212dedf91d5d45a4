"""The registry's rules for agent types and agents, with their lifecycle.

`AgentRegistry` knows nothing of gRPC. Who may call which operation at all (signed in,
superuser, system) is decided before it, by the policy table in `policy.py`; what depends on the
data — an agent belongs to its project's owner (and superusers) — is decided here, by the project
rules' `visible_project`. Anyone else is told NOT_FOUND, exactly as for an agent that does not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from agentmesh.registry.agents.capabilities import declaration_warnings
from agentmesh.registry.agents.history import AgentVersionRules
from agentmesh.registry.agents.lifecycle import (
    paused,
    resolve,
    resumed,
    retired,
    terminated,
)
from agentmesh.registry.agents.versions import as_of, record_version
from agentmesh.registry.agents.watch import AgentChange, AgentWatch
from agentmesh.registry.clock import Clock, utc_now
from agentmesh.registry.errors import (
    AgentNotFound,
    AgentTerminated,
    AgentTypeInactive,
    AgentTypeInUse,
    AgentTypeNotFound,
)
from agentmesh.registry.mcp_servers.registry import servers_with_kept_secrets
from agentmesh.registry.models import (
    AGENT_CONFIG_FIELDS,
    AGENT_TYPE_FIELDS,
    Agent,
    AgentConfig,
    AgentMetrics,
    AgentSpec,
    AgentStatus,
    AgentType,
    AgentTypeFields,
    NewAgent,
    Page,
)
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible, visible_project
from agentmesh.registry.runs.executors import ExecutorPool
from agentmesh.registry.runs.input_models import Cancellation
from agentmesh.registry.runs.input_requests import responder
from agentmesh.registry.store import DuplicateRequest, RegistryStore, StoreTransaction
from agentmesh.registry.validation import (
    DEFAULT_MAX_STEPS,
    check_agent_config,
    check_agent_name,
    check_agent_slug,
    check_agent_type,
    exactly_one,
    raise_if,
    required,
    slugify,
    update_paths,
)
from agentmesh.runtime.identity import Principal

T = TypeVar("T")


class AgentRegistry(AgentVersionRules):
    """Agent types (templates) and agents (instances) with their lifecycle, usage and versions."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        executors: ExecutorPool,
        clock: Clock = utc_now,
        watch: AgentWatch | None = None,
    ) -> None:
        self.watch = watch or AgentWatch()  # committed changes, pushed to executors (WatchAgents)
        self._store = store
        self._pages = page_tokens
        self._executors = executors  # what today's executors offer, for the declaration warnings
        self._now = clock

    # --- Agent types -------------------------------------------------------------------------

    async def create_agent_type(self, fields: AgentTypeFields, *, request_id: str = "") -> AgentType:
        fields = _normalized_type(fields.model_copy(update={"slug": fields.slug or slugify(fields.name)}))
        raise_if(check_agent_type(fields))
        if request_id:
            async with self._store.read() as tx:
                existing = await tx.get_agent_type(request_id=request_id)
            if existing is not None:
                return existing
        now = self._now()
        agent_type = AgentType(**fields.model_dump(), id=str(uuid.uuid4()), created_at=now, updated_at=now)
        try:
            async with self._store.write() as tx:
                return await tx.insert_agent_type(agent_type, request_id=request_id or None)
        except DuplicateRequest:
            async with self._store.read() as tx:
                return _found(await tx.get_agent_type(request_id=request_id), AgentTypeNotFound, "agent type")

    async def get_agent_type(self, *, type_id: str = "", slug: str = "") -> AgentType:
        raise_if(exactly_one("id", type_id, "slug", slug))
        async with self._store.read() as tx:
            agent_type = await tx.get_agent_type(type_id=type_id or None, slug=slug or None)
        return _found(agent_type, AgentTypeNotFound, "agent type")

    async def list_agent_types(
        self, *, page_size: int = 0, page_token: str = "", page: int = 0
    ) -> Page[AgentType]:
        scope = "agent_types"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            found = await tx.list_agent_types(request)
        return self._pages.page(found, scope=scope)

    async def update_agent_type(
        self, type_id: str, fields: AgentTypeFields, mask: Iterable[str], *, by: str = ""
    ) -> AgentType:
        """Changes the type's fields named by the mask; every agent of the type gets a new
        version (made `by` that user)."""
        raise_if(required("agent_type.id", type_id))
        paths = _mask(mask, AGENT_TYPE_FIELDS)
        async with self._store.write() as tx:
            current = _found(
                await tx.get_agent_type(type_id=type_id, for_update=True), AgentTypeNotFound, "agent type"
            )
            changes = {path: getattr(fields, path) for path in paths}
            if "mcp_servers" in changes:  # a masked secret sent back keeps its value
                changes["mcp_servers"] = servers_with_kept_secrets(fields.mcp_servers, current.mcp_servers)
            updated = AgentType.model_validate(
                {**current.model_dump(), **_normalized_type_changes(changes), "updated_at": self._now()}
            )
            raise_if(check_agent_type(updated))
            updated = await tx.update_agent_type(updated)
            for agent in await tx.agents_of_type(type_id, for_update=True):
                before = (agent, current)
                await record_version(tx, agent, updated, by=by, now=updated.updated_at, before=before)
        self.watch.reset()
        return updated

    async def delete_agent_type(self, type_id: str) -> None:
        raise_if(required("id", type_id))
        async with self._store.write() as tx:
            _found(await tx.get_agent_type(type_id=type_id, for_update=True), AgentTypeNotFound, "agent type")
            if await tx.agent_type_in_use(type_id):
                raise AgentTypeInUse("agents were spawned from this type; delete their projects first")
            await tx.delete_agent_type(type_id)

    # --- Agents ------------------------------------------------------------------------------

    async def create_agent(
        self, principal: Principal, new: NewAgent, *, request_id: str = "", replace_terminated: bool = False
    ) -> Agent:
        """Spawns an agent. With `replace_terminated`, a terminated agent of the same name or slug
        gives them up to it (`retired`): how a terminated agent is re-created."""
        name = new.name.strip()
        slug = new.slug.strip() or slugify(name)
        raise_if(
            required("agent.project_id", new.project_id)
            + required("agent.agent_type_id", new.agent_type_id)
            + check_agent_name(name)
            + (check_agent_slug(slug) if name else [])
        )
        project_request = (new.project_id, request_id)
        now = self._now()
        try:
            async with self._store.write() as tx:
                await visible_project(tx, principal, new.project_id)
                if request_id and (existing := await tx.get_agent(project_request=project_request)):
                    return existing
                agent_type = _found(
                    await tx.get_agent_type(type_id=new.agent_type_id), AgentTypeNotFound, "agent type"
                )
                if not agent_type.is_active:
                    raise AgentTypeInactive(
                        f"agent type {agent_type.slug!r} is inactive; agents cannot be spawned"
                    )
                gave_up: list[Agent] = []  # terminated agents whose name the new one takes
                for ref in dict.fromkeys((name, slug)) if replace_terminated else ():
                    held = await tx.get_agent(project_ref=(new.project_id, ref), for_update=True)
                    if held is not None and held.status is AgentStatus.TERMINATED:
                        gave_up.append(await tx.update_agent(retired(held)))
                siblings = await tx.agent_slugs(new.project_id)
                remotes = await tx.remote_agent_names(new.project_id)
                raise_if(
                    check_agent_config(
                        new.config,
                        agent_name=name,
                        agent_slug=slug,
                        project_agents=[*_refs(siblings), *remotes],
                    )
                )
                agent = Agent(
                    id=str(uuid.uuid4()),
                    name=name,
                    slug=slug,
                    project_id=new.project_id,
                    agent_type_id=agent_type.id,
                    status=AgentStatus.IDLE,
                    config=new.config,
                    public=new.public,
                    created_at=now,
                    last_activity_at=now,
                )
                agent = await tx.insert_agent(agent, request_id=request_id or None)
                await record_version(tx, agent, agent_type, by=principal.user_id, now=now)
            for old in gave_up:  # an executor that knew it by its name forgets it
                self.watch.changed(AgentChange(old.id, spec_changed=True))
            return agent
        except DuplicateRequest:
            async with self._store.read() as tx:
                return _found(await tx.get_agent(project_request=project_request), AgentNotFound, "agent")

    async def get_agent(self, principal: Principal, project_id: str, agent_id: str) -> Agent:
        async with self._store.read() as tx:
            return await self._agent(tx, principal, project_id, agent_id)

    async def list_agents(
        self,
        principal: Principal,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[Agent]:
        raise_if(required("project_id", project_id))
        scope = f"agents:{project_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await visible_project(tx, principal, project_id)
            found = await tx.list_agents(project_id, request)
        return self._pages.page(found, scope=scope)

    async def update_agent(
        self,
        principal: Principal,
        project_id: str,
        agent_id: str,
        config: AgentConfig,
        mask: Iterable[str],
        *,
        public: bool = False,
    ) -> Agent:
        """Changes what the mask names: the agent's config overrides, `config` (all of it) or
        `config.<field>` (a field named but not set is cleared: the type's value applies), and
        whether its owner publishes it (`public`). Publishing changes nothing its runs use, so
        it makes no new version."""
        paths = list(dict.fromkeys(mask))
        publish = "public" in paths or "*" in paths
        rest = [path for path in paths if path != "public"]
        fields = _config_mask(rest) if rest or not publish else []
        async with self._store.write() as tx:
            agent = await self._agent(tx, principal, project_id, agent_id, for_update=True)
            if agent.status is AgentStatus.TERMINATED:
                raise AgentTerminated("a terminated agent cannot be changed")
            merged = agent.config.model_copy(update={field: getattr(config, field) for field in fields})
            if fields:
                siblings = await tx.agent_slugs(project_id)
                remotes = await tx.remote_agent_names(project_id)
                raise_if(
                    check_agent_config(
                        merged,
                        agent_name=agent.name,
                        agent_slug=agent.slug,
                        project_agents=[*_refs(siblings), *remotes],
                    )
                )
            changes = {"config": merged, "public": public if publish else agent.public}
            updated = await tx.update_agent(agent.model_copy(update=changes))
            if fields:
                agent_type = _found(
                    await tx.get_agent_type(type_id=agent.agent_type_id), AgentTypeNotFound, "agent type"
                )
                await record_version(
                    tx, updated, agent_type, by=principal.user_id, now=self._now(), before=(agent, agent_type)
                )
        self.watch.changed(AgentChange(updated.id, spec_changed=bool(fields)))
        return updated

    async def list_public_agents(self, *, page_size: int = 0, page_token: str = "") -> Page[AgentSpec]:
        """The agents their owners published, across projects, each resolved at its latest (what
        the gateway's discovery index and public cards show). The policy table lets only the
        system principal ask."""
        scope = "public-agents"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=0, scope=scope)
        specs = []
        async with self._store.read() as tx:
            found = await tx.list_public_agents(request)
            for agent in found.items:
                project = _found(await tx.get_project(project_id=agent.project_id), AgentNotFound, "project")
                agent_type = _found(
                    await tx.get_agent_type(type_id=agent.agent_type_id), AgentTypeNotFound, "agent type"
                )
                siblings = await tx.agent_slugs(project.id)
                specs.append(resolve(agent, agent_type, project, siblings))
        page = self._pages.page(found, scope=scope)
        return Page(items=specs, next_page_token=page.next_page_token, total_size=page.total_size)

    async def pause_agent(self, principal: Principal, project_id: str, agent_id: str) -> Agent:
        return await self._transition(principal, project_id, agent_id, paused)

    async def resume_agent(self, principal: Principal, project_id: str, agent_id: str) -> Agent:
        return await self._transition(principal, project_id, agent_id, resumed)

    async def terminate_agent(self, principal: Principal, project_id: str, agent_id: str) -> Agent:
        """Terminates the agent (no run starts any more) and cancels its waiting runs, each with
        the waiting runs below it: no executor holds them to stop, so the registry hands each to
        one that records its end as cancelled (`runs/cancel_store.py`). Its runs in flight are
        the executors' to stop (the gateway asks them)."""
        agent = await self._transition(principal, project_id, agent_id, terminated)
        cancellation = Cancellation(by=responder(principal), reason="the agent was terminated")
        if await self._store.input_requests.cancel_agent_runs(agent.id, cancellation, self._now()):
            self.watch.runs_ready()
        return agent

    async def agent_metrics(self, principal: Principal, project_id: str, agent_id: str) -> AgentMetrics:
        agent = await self.get_agent(principal, project_id, agent_id)
        return AgentMetrics(
            total_instances=1,
            active_instances=int(agent.status is AgentStatus.WORKING),
            # A waiting agent holds no executor: idle, as far as capacity goes.
            idle_instances=int(agent.status in (AgentStatus.IDLE, AgentStatus.WAITING)),
            total_tasks_completed=agent.tasks_completed,
            total_tokens_used=agent.tokens_used,
            total_cost_incurred=agent.cost,
        )

    # --- What executors call -----------------------------------------------------------------

    async def resolve_agent(
        self, principal: Principal, project_slug: str, agent_name: str, *, session_id: str = ""
    ) -> AgentSpec:
        """The agent of the project that has `agent_name` as its slug or, failing that, as its
        exact name, resolved for running: at the version the session's runs of it use, when a
        session is given and has run it, else at its latest."""
        raise_if(required("project_slug", project_slug) + required("agent_name", agent_name))
        found_project, found_agent, agent_type = await self._store.resolve(project_slug, agent_name)
        project = visible(principal, found_project)
        agent = _found(found_agent, AgentNotFound, f"agent {agent_name!r}")
        assert agent_type is not None  # agents.agent_type_id is a RESTRICT foreign key
        async with self._store.read() as tx:
            pinned = await tx.session_version(agent.id, session_id) if session_id else None
            version = await tx.get_agent_version(agent.id, pinned or 0)
            if pinned and version is not None:
                agent, agent_type = as_of(agent, version)
            siblings: dict[str, str] = {}
            if agent.config.sub_agents or agent.config.network_access or agent_type.sub_agents:
                # Only agents that name others need the project's names (to turn them into slugs).
                siblings = await tx.agent_slugs(project.id)
        spec = resolve(agent, agent_type, project, siblings)
        return spec.model_copy(update={"version": version.number if version else 0})

    async def agent_type_warnings(self, agent_type: AgentType) -> list[str]:
        """What would keep agents of this type from running on today's executors."""
        return declaration_warnings(
            models=[agent_type.primary_model, *agent_type.fallback_models],
            tools=agent_type.tools,
            scripted=False,
            executors=await self._executors.list_executors(),
        )

    async def agent_warnings(self, agent: Agent) -> list[str]:
        """What would keep this agent (its type with its overrides) from running on today's
        executors."""
        async with self._store.read() as tx:
            agent_type = await tx.get_agent_type(type_id=agent.agent_type_id)
        if agent_type is None:
            return []
        config = agent.config
        primary = agent_type.primary_model if config.primary_model is None else config.primary_model
        return declaration_warnings(
            models=[primary, *agent_type.fallback_models],
            tools=agent_type.tools if config.tools is None else config.tools,
            scripted=bool(config.mock_responses),
            executors=await self._executors.list_executors(),
        )

    # --- Helpers -----------------------------------------------------------------------------

    async def _transition(
        self, principal: Principal, project_id: str, agent_id: str, change: Callable[[Agent, datetime], Agent]
    ) -> Agent:
        async with self._store.write() as tx:
            agent = await self._agent(tx, principal, project_id, agent_id, for_update=True)
            changed = change(agent, self._now())
            if changed is agent:
                return agent
            updated = await tx.update_agent(changed)
        self.watch.changed(AgentChange(updated.id, status=updated.status))
        return updated

    async def _agent(
        self,
        tx: StoreTransaction,
        principal: Principal,
        project_id: str,
        agent_id: str,
        *,
        for_update: bool = False,
    ) -> Agent:
        """The project's agent whose id, slug or exact name is `agent_id` (in that order)."""
        raise_if(required("project_id", project_id) + required("id", agent_id))
        await visible_project(tx, principal, project_id)
        agent = await tx.get_agent(project_ref=(project_id, agent_id), for_update=for_update)
        if agent is None:
            raise AgentNotFound("agent not found")
        return agent


def _found(value: T | None, error: type[Exception], what: str) -> T:
    if value is None:
        raise error(f"{what} not found")
    return value


def _mask(mask: Iterable[str], allowed: Iterable[str]) -> list[str]:
    paths, violations = update_paths(mask, allowed)
    raise_if(violations)
    return paths


def _config_mask(mask: Iterable[str]) -> list[str]:
    paths = list(dict.fromkeys(mask))
    if "config" in paths or "*" in paths:
        return list(AGENT_CONFIG_FIELDS)
    allowed = tuple(f"config.{field}" for field in AGENT_CONFIG_FIELDS)
    return [path.removeprefix("config.") for path in _mask(paths, allowed)]


def _normalized_type(fields: AgentTypeFields) -> AgentTypeFields:
    return fields.model_copy(update=_normalized_type_changes({"max_steps": fields.max_steps}))


def _normalized_type_changes(changes: dict[str, object]) -> dict[str, object]:
    # 0 (proto3's "not set") means the default step bound.
    if changes.get("max_steps") == 0:
        return {**changes, "max_steps": DEFAULT_MAX_STEPS}
    return changes


def _refs(agents: dict[str, str]) -> list[str]:
    """Every way to name the agents of a slug → name map."""
    return [*agents, *agents.values()]
