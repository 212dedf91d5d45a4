"""Remote A2A agents as a registry resource: a project's owner registers an agent
outside the mesh by its agent card's URL, with a bearer credential; the project's agents may then
name it in their network access and delegate to it over A2A.

The credential is write-only: every answer shows MASK when one is set, and an update that sends
MASK back keeps the stored one (so a read-modify-write, e.g. `agentmesh apply`, never erases it).
The one answer with it is `resolve`, which only the system principal (executors) may call (see
`policy.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from urllib.parse import urlparse

from agentmesh.registry.errors import RemoteAgentNotFound, ValidationFailed
from agentmesh.registry.models import Page
from agentmesh.registry.pagination import PageTokens
from agentmesh.registry.projects.registry import visible_project
from agentmesh.registry.remote_agents.models import RemoteAgent
from agentmesh.registry.remote_agents.store import name_taken
from agentmesh.registry.store import RegistryStore, StoreTransaction
from agentmesh.registry.validation import DNS_LABEL_RULE, is_dns_label, refuse_egress, update_paths
from agentmesh.runtime.egress import EgressPolicy
from agentmesh.runtime.errors import FieldViolation
from agentmesh.runtime.identity import Principal

MASK = "********"
MAX_DESCRIPTION = 2000
MAX_URL = 2000
MAX_CREDENTIAL = 8000
# What UpdateRemoteAgent may change (the id, project and creation time are fixed).
UPDATABLE = ("name", "card_url", "credential", "description")

Clock = Callable[[], datetime]


def masked(remote: RemoteAgent) -> RemoteAgent:
    """The remote agent as answers show it: its credential, when set, as MASK."""
    return remote.model_copy(update={"credential": MASK}) if remote.credential else remote


class RemoteAgentRegistry:
    """Registers, reads, updates and deletes a project's remote agents (its owner or superusers)."""

    def __init__(
        self,
        store: RegistryStore,
        *,
        page_tokens: PageTokens,
        clock: Clock,
        egress: EgressPolicy | None = None,
    ) -> None:
        self._store = store
        self._pages = page_tokens
        self._clock = clock
        # The executors' egress policy: a card URL it refuses is refused here, when it is given.
        self._egress = egress or EgressPolicy()

    async def create(
        self,
        principal: Principal,
        *,
        project_id: str,
        name: str,
        card_url: str,
        credential: str,
        description: str,
    ) -> RemoteAgent:
        _check(
            project_id=project_id,
            name=name,
            card_url=card_url,
            credential=credential,
            description=description,
        )
        await refuse_egress(self._egress, card_url, "remote_agent.card_url")
        async with self._store.write() as tx:
            await self._project(tx, principal, project_id)
            if name in await tx.agent_slugs(project_id):
                raise name_taken(name)
            remote = RemoteAgent(
                id=str(uuid.uuid4()),
                project_id=project_id,
                name=name,
                card_url=card_url,
                credential=credential,
                description=description,
                created_at=self._clock(),
            )
            return await tx.insert_remote_agent(remote)

    async def get(self, principal: Principal, project_id: str, remote_id: str) -> RemoteAgent:
        async with self._store.read() as tx:
            await self._project(tx, principal, project_id)
            remote = await tx.get_remote_agent(project_id, remote_id=remote_id)
        if remote is None:
            raise RemoteAgentNotFound("remote agent not found")
        return remote

    async def list(
        self,
        principal: Principal,
        project_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        page: int = 0,
    ) -> Page[RemoteAgent]:
        """One page of the project's remote agents, oldest first (the registry's paging)."""
        scope = f"remote_agents:{project_id}"
        request = self._pages.request(page_size=page_size, page_token=page_token, page=page, scope=scope)
        async with self._store.read() as tx:
            await self._project(tx, principal, project_id)
            found = await tx.list_remote_agents(project_id, request)
        return self._pages.page(found, scope=scope)

    async def update(self, principal: Principal, given: RemoteAgent, mask: Iterable[str]) -> RemoteAgent:
        """Changes the fields `mask` names to `given`'s values; a credential given as MASK keeps
        the stored one. The name stays unique among the project's agents and remote agents."""
        paths, violations = update_paths(mask, UPDATABLE)
        if not given.id:
            violations.insert(0, FieldViolation("remote_agent.id", "is required"))
        if violations:
            raise ValidationFailed.of(violations)
        if "card_url" in paths:
            await refuse_egress(self._egress, given.card_url, "remote_agent.card_url")
        async with self._store.write() as tx:
            await self._project(tx, principal, given.project_id)
            current = await tx.get_remote_agent(given.project_id, remote_id=given.id)
            if current is None:
                raise RemoteAgentNotFound("remote agent not found")
            values = {path: getattr(given, path) for path in paths}
            if values.get("credential") == MASK:
                values["credential"] = current.credential
            updated = current.model_copy(update=values)
            _check(
                project_id=updated.project_id,
                name=updated.name,
                card_url=updated.card_url,
                credential=updated.credential,
                description=updated.description,
            )
            if updated.name != current.name and updated.name in await tx.agent_slugs(updated.project_id):
                raise name_taken(updated.name)
            return await tx.update_remote_agent(updated)

    async def delete(self, principal: Principal, project_id: str, remote_id: str) -> None:
        async with self._store.write() as tx:
            await self._project(tx, principal, project_id)
            if await tx.get_remote_agent(project_id, remote_id=remote_id) is None:
                raise RemoteAgentNotFound("remote agent not found")
            await tx.delete_remote_agent(remote_id)

    async def resolve(self, project_id: str, name: str) -> RemoteAgent:
        """The project's remote agent of that name, credential included (executors only)."""
        async with self._store.read() as tx:
            remote = await tx.get_remote_agent(project_id, name=name)
        if remote is None:
            raise RemoteAgentNotFound(f"no remote agent named {name!r} in this project")
        return remote

    async def _project(self, tx: StoreTransaction, principal: Principal, project_id: str) -> None:
        if not project_id:
            raise ValidationFailed.of([FieldViolation("project_id", "is required")])
        await visible_project(tx, principal, project_id)


def _check(*, project_id: str, name: str, card_url: str, credential: str, description: str) -> None:
    violations = remote_agent_violations(
        project_id=project_id, name=name, card_url=card_url, credential=credential, description=description
    )
    if violations:
        raise ValidationFailed.of(violations)


def remote_agent_violations(
    *,
    project_id: str,
    name: str,
    card_url: str,
    credential: str,
    description: str,
    prefix: str = "remote_agent",
) -> list[FieldViolation]:
    """What is wrong with a remote agent's fields (also checked by `agentmesh apply` before it
    writes, through `declarations.check_remote_agent`)."""
    violations: list[FieldViolation] = []
    if not project_id:
        violations.append(FieldViolation(f"{prefix}.project_id", "is required"))
    if not is_dns_label(name):
        violations.append(FieldViolation(f"{prefix}.name", DNS_LABEL_RULE))
    url = urlparse(card_url)
    if url.scheme not in ("http", "https") or not url.netloc or len(card_url) > MAX_URL:
        violations.append(
            FieldViolation(
                f"{prefix}.card_url", f"must be an http or https URL of at most {MAX_URL} characters"
            )
        )
    if len(credential) > MAX_CREDENTIAL or any(ch in credential for ch in "\r\n"):
        violations.append(
            FieldViolation(f"{prefix}.credential", f"one line of at most {MAX_CREDENTIAL} characters")
        )
    if len(description) > MAX_DESCRIPTION:
        violations.append(FieldViolation(f"{prefix}.description", f"at most {MAX_DESCRIPTION} characters"))
    return violations
