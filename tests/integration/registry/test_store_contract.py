"""The RegistryStore contract: one suite over every implementation (in memory, SQLite, PostgreSQL),
asserting what the registry's rules rely on."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh.registry.errors import AgentNameTaken, EmailTaken, SlugTaken
from agentmesh.registry.models import (
    Agent,
    AgentConfig,
    AgentKind,
    AgentStatus,
    AgentType,
    Executor,
    McpServer,
    NewUser,
    PageRequest,
    Project,
    RefreshToken,
)
from agentmesh.registry.runs.executors import ExecutorPool
from agentmesh.registry.store import DuplicateRequest, RegistryStore, Visibility

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _id() -> str:
    return str(uuid.uuid4())


async def _user(store: RegistryStore, email: str = "ada@example.com") -> str:
    user_id = _id()
    async with store.write() as tx:
        await tx.insert_user(NewUser(email=email), user_id=user_id, password_hash="hash", now=T0)
    return user_id


def _agent_type(slug: str = "writer", at: datetime = T0, **fields: object) -> AgentType:
    return AgentType(id=_id(), name=slug.title(), slug=slug, created_at=at, updated_at=at, **fields)


def _project(owner_id: str, slug: str = "books", at: datetime = T0) -> Project:
    return Project(id=_id(), name=slug.title(), slug=slug, owner_id=owner_id, created_at=at, updated_at=at)


def _agent(
    project: Project, agent_type: AgentType, name: str = "worker", at: datetime = T0, slug: str = ""
) -> Agent:
    return Agent(
        id=_id(),
        name=name,
        slug=slug or name,
        project_id=project.id,
        agent_type_id=agent_type.id,
        status=AgentStatus.IDLE,
        created_at=at,
        last_activity_at=at,
    )


async def _world(store: RegistryStore) -> tuple[str, AgentType, Project, Agent]:
    owner = await _user(store)
    agent_type, project = _agent_type(), _project(owner)
    agent = _agent(project, agent_type)
    async with store.write() as tx:
        await tx.insert_agent_type(agent_type, request_id=None)
        await tx.insert_project(project, request_id=None)
        await tx.insert_agent(agent, request_id=None)
    return owner, agent_type, project, agent


# --- users and refresh tokens -------------------------------------------------------------------


async def test_users_are_stored_once_per_email(registry_store: RegistryStore) -> None:
    user_id = await _user(registry_store)
    with pytest.raises(EmailTaken):
        await _user(registry_store)
    async with registry_store.read() as tx:
        user = await tx.get_user(user_id)
        credentials = await tx.get_credentials("ada@example.com")
        assert await tx.get_user(_id()) is None
        assert await tx.get_credentials("nobody@example.com") is None
    assert user is not None and (user.email, user.is_active, user.is_superuser, user.created_at) == (
        "ada@example.com",
        True,
        False,
        T0,
    )
    assert credentials is not None and (credentials.user, credentials.password_hash) == (user, "hash")


async def test_user_password_and_flags_change(registry_store: RegistryStore) -> None:
    user_id = await _user(registry_store)
    async with registry_store.write() as tx:
        await tx.set_password_hash(user_id, "new-hash")
        await tx.set_user_flags(user_id, is_superuser=True, is_active=False)
    async with registry_store.read() as tx:
        credentials = await tx.get_credentials("ada@example.com", for_update=False)
    assert credentials is not None
    assert credentials.password_hash == "new-hash"
    assert (credentials.user.is_superuser, credentials.user.is_active) == (True, False)


async def test_refresh_tokens_are_used_and_revoked_by_family(registry_store: RegistryStore) -> None:
    user_id = await _user(registry_store)
    family = _id()
    tokens = [
        RefreshToken(
            id=_id(),
            user_id=user_id,
            family_id=family_id,
            token_hash=f"hash-{n}",
            created_at=T0,
            expires_at=T0 + timedelta(days=1),
        )
        for n, family_id in enumerate((family, family, _id()))
    ]
    async with registry_store.write() as tx:
        for token in tokens:
            await tx.insert_refresh_token(token)
        await tx.mark_refresh_token_used(tokens[0].id, T0 + timedelta(seconds=1))
        await tx.revoke_refresh_family(family, T0 + timedelta(seconds=2))
    async with registry_store.read() as tx:
        found = [await tx.get_refresh_token(token.token_hash) for token in tokens]
        assert await tx.get_refresh_token("unknown") is None
    assert [t.used_at if t else None for t in found] == [T0 + timedelta(seconds=1), None, None]
    assert [t.revoked_at if t else None for t in found] == [T0 + timedelta(seconds=2)] * 2 + [None]


# --- agent types, projects, agents --------------------------------------------------------------


async def test_agent_types_round_trip_every_field(registry_store: RegistryStore) -> None:
    agent_type = _agent_type(
        expertise=["prose"],
        personality_prompt="Write.",
        primary_model="mock",
        fallback_models=["openai/gpt-4o-mini"],
        model_params={"temperature": 0.5},
        tools=["search"],
        mcp_servers=[McpServer(name="fs", transport="stdio", command="fs", args=["-v"])],
        kind=AgentKind.LOOP,
        sub_agents=["a", "b"],
        max_steps=7,
        max_iterations=3,
    )
    async with registry_store.write() as tx:
        await tx.insert_agent_type(agent_type, request_id="req-1")
    async with registry_store.read() as tx:
        assert await tx.get_agent_type(type_id=agent_type.id) == agent_type
        assert await tx.get_agent_type(slug="writer") == agent_type
        assert await tx.get_agent_type(request_id="req-1") == agent_type
        assert await tx.get_agent_type(slug="other") is None


async def test_agent_type_slugs_and_request_ids_are_unique(registry_store: RegistryStore) -> None:
    first, second = _agent_type("one"), _agent_type("two")
    async with registry_store.write() as tx:
        await tx.insert_agent_type(first, request_id="req-1")
        await tx.insert_agent_type(second, request_id=None)
    with pytest.raises(SlugTaken):
        async with registry_store.write() as tx:
            await tx.insert_agent_type(_agent_type("one"), request_id=None)
    with pytest.raises(DuplicateRequest):
        async with registry_store.write() as tx:
            await tx.insert_agent_type(_agent_type("three"), request_id="req-1")
    with pytest.raises(SlugTaken):
        async with registry_store.write() as tx:
            await tx.update_agent_type(second.model_copy(update={"slug": "one"}))
    async with registry_store.read() as tx:
        assert (await tx.list_agent_types(PageRequest(size=10))).total == 2
        assert await tx.get_agent_type(type_id=second.id) == second


async def test_agent_types_update_and_delete(registry_store: RegistryStore) -> None:
    _, agent_type, _, _ = await _world(registry_store)
    unused = _agent_type("unused")
    changed = agent_type.model_copy(
        update={"slug": "renamed", "max_steps": 9, "updated_at": T0 + timedelta(1)}
    )
    async with registry_store.write() as tx:
        await tx.insert_agent_type(unused, request_id=None)
        assert await tx.update_agent_type(changed) == changed
        assert await tx.agent_type_in_use(agent_type.id)
        assert not await tx.agent_type_in_use(unused.id)
        await tx.delete_agent_type(unused.id)
    async with registry_store.read() as tx:
        assert await tx.get_agent_type(type_id=agent_type.id) == changed
        assert await tx.get_agent_type(type_id=unused.id) is None


async def test_projects_are_unique_by_slug_and_by_request_per_owner(registry_store: RegistryStore) -> None:
    ada, bob = await _user(registry_store), await _user(registry_store, "bob@example.com")
    project = _project(ada)
    async with registry_store.write() as tx:
        await tx.insert_project(project, request_id="req-1")
        await tx.insert_project(_project(bob, "other"), request_id="req-1")  # another owner's request
    with pytest.raises(SlugTaken):
        async with registry_store.write() as tx:
            await tx.insert_project(_project(bob), request_id=None)
    with pytest.raises(DuplicateRequest):
        async with registry_store.write() as tx:
            await tx.insert_project(_project(ada, "third"), request_id="req-1")
    async with registry_store.read() as tx:
        assert await tx.get_project(owner_request=(ada, "req-1")) == project
        assert await tx.get_project(slug="books") == project
        assert (await tx.list_projects(ada, PageRequest(size=10))).items == [project]
        assert (await tx.list_projects(None, PageRequest(size=10))).total == 2


async def test_a_project_update_keeps_slugs_unique_and_a_delete_takes_its_agents(
    registry_store: RegistryStore,
) -> None:
    owner, agent_type, project, agent = await _world(registry_store)
    other = _project(owner, "other")
    renamed = project.model_copy(update={"name": "Novels", "updated_at": T0 + timedelta(1)})
    async with registry_store.write() as tx:
        await tx.insert_project(other, request_id=None)
        await tx.update_project(renamed)
    with pytest.raises(SlugTaken):
        async with registry_store.write() as tx:
            await tx.update_project(other.model_copy(update={"slug": "books"}))
    run = await registry_store.start_run(Visibility(owner, everything=False), agent.id, "run-1", T0)
    assert run is not None and run.changed
    async with registry_store.write() as tx:
        assert await tx.get_project(project_id=project.id) == renamed
        await tx.delete_project(project.id)
    async with registry_store.read() as tx:
        assert await tx.get_project(project_id=project.id) is None
        assert await tx.get_agent(agent_id=agent.id) is None
        assert await tx.get_agent_type(type_id=agent_type.id) == agent_type


async def test_agent_names_and_requests_are_unique_within_a_project(registry_store: RegistryStore) -> None:
    owner, agent_type, project, agent = await _world(registry_store)
    other = _project(owner, "other")
    config = AgentConfig(instructions="Be brief.", network_access=["helper"], mock_responses=["hi", {"a": 1}])
    twin = _agent(other, agent_type).model_copy(update={"config": config})
    async with registry_store.write() as tx:
        await tx.insert_project(other, request_id=None)
        await tx.insert_agent(twin, request_id="req-1")  # the same name in another project
    with pytest.raises(AgentNameTaken):
        async with registry_store.write() as tx:
            await tx.insert_agent(_agent(project, agent_type), request_id=None)
    with pytest.raises(DuplicateRequest):
        async with registry_store.write() as tx:
            await tx.insert_agent(_agent(other, agent_type, "fresh"), request_id="req-1")
    async with registry_store.read() as tx:
        assert await tx.get_agent(agent_id=twin.id) == twin
        assert await tx.get_agent(project_ref=(project.id, "worker")) == agent
        assert await tx.get_agent(project_request=(other.id, "req-1")) == twin
        assert await tx.agent_slugs(project.id) == {"worker": "worker"}


async def test_agent_slugs_are_unique_within_a_project_and_address_it(registry_store: RegistryStore) -> None:
    _, agent_type, project, worker = await _world(registry_store)
    named = _agent(project, agent_type, "My PO Agent", slug="my-po-agent")
    async with registry_store.write() as tx:
        await tx.insert_agent(named, request_id=None)
    with pytest.raises(AgentNameTaken):  # another name, the same slug
        async with registry_store.write() as tx:
            await tx.insert_agent(
                _agent(project, agent_type, "My  PO Agent", slug="my-po-agent"), request_id=None
            )
    # A name that is another agent's slug: the slug wins, as an id wins over both.
    shadow = _agent(project, agent_type, "worker-two", slug="shadow").model_copy(
        update={"name": "my-po-agent"}
    )
    async with registry_store.write() as tx:
        await tx.insert_agent(shadow, request_id=None)
    async with registry_store.read() as tx:
        for ref in ("my-po-agent", "My PO Agent", named.id):
            assert await tx.get_agent(project_ref=(project.id, ref)) == named, ref
        assert await tx.get_agent(project_ref=(project.id, "shadow")) == shadow
        assert await tx.get_agent(project_ref=(project.id, "my po agent")) is None
        assert await tx.get_agent(project_ref=(project.id, worker.id)) == worker
        assert await tx.agent_slugs(project.id) == {
            "worker": "worker",
            "my-po-agent": "My PO Agent",
            "shadow": "my-po-agent",
        }
    assert await registry_store.resolve("books", "My PO Agent") == (project, named, agent_type)
    assert await registry_store.resolve("books", "my-po-agent") == (project, named, agent_type)
    assert await registry_store.resolve("books", "shadow") == (project, shadow, agent_type)


async def test_an_agent_update_is_stored_whole(registry_store: RegistryStore) -> None:
    _, _, _, agent = await _world(registry_store)
    changed = agent.model_copy(
        update={
            "status": AgentStatus.PAUSED,
            "config": AgentConfig(max_steps=3),
            "cost": 1.5,
            "tokens_used": 9,
        }
    )
    async with registry_store.write() as tx:
        await tx.update_agent(changed)
    async with registry_store.read() as tx:
        assert await tx.get_agent(agent_id=agent.id) == changed


async def test_a_failed_write_leaves_nothing_behind(registry_store: RegistryStore) -> None:
    with pytest.raises(RuntimeError):
        async with registry_store.write() as tx:
            await tx.insert_agent_type(_agent_type(), request_id=None)
            raise RuntimeError("the rules refused")
    async with registry_store.read() as tx:
        assert (await tx.list_agent_types(PageRequest(size=10))).total == 0


# --- lists: order and paging --------------------------------------------------------------------


async def test_lists_page_by_keyset_in_creation_order(registry_store: RegistryStore) -> None:
    # Two share a creation time, so the id breaks the tie.
    times = [T0 + timedelta(seconds=n // 2) for n in range(7)]
    created = [_agent_type(f"type-{n}", at) for n, at in enumerate(times)]
    async with registry_store.write() as tx:
        for agent_type in reversed(created):
            await tx.insert_agent_type(agent_type, request_id=None)
    expected = sorted(created, key=lambda t: (t.created_at, t.id))

    pages, after = [], None
    while True:
        async with registry_store.read() as tx:
            found = await tx.list_agent_types(PageRequest(size=3, after=after))
        pages.append(found.items)
        assert found.total == 7
        if not found.has_more:
            break
        after = (found.items[-1].created_at, found.items[-1].id)
    assert pages == [expected[0:3], expected[3:6], expected[6:]]


async def test_a_page_number_reaches_the_same_pages_without_walking(registry_store: RegistryStore) -> None:
    owner = await _user(registry_store)
    agent_type = _agent_type()
    projects = [_project(owner, "p"), _project(owner, "q")]
    created = []
    async with registry_store.write() as tx:
        await tx.insert_agent_type(agent_type, request_id=None)
        for project in projects:
            await tx.insert_project(project, request_id=None)
        for n in range(8):
            agent = _agent(projects[0], agent_type, f"a{n}", T0 + timedelta(seconds=n % 3))
            created.append(await tx.insert_agent(agent, request_id=None))
        await tx.insert_agent(_agent(projects[1], agent_type, "elsewhere"), request_id=None)
    expected = sorted(created, key=lambda a: (a.created_at, a.id))
    async with registry_store.read() as tx:
        pages = [
            await tx.list_agents(projects[0].id, PageRequest(size=3, skip=skip)) for skip in (0, 3, 6, 9)
        ]
    assert [page.items for page in pages] == [expected[0:3], expected[3:6], expected[6:], []]
    assert [page.has_more for page in pages] == [True, True, False, False]
    assert {page.total for page in pages} == {8}


async def test_an_empty_list_has_empty_pages(registry_store: RegistryStore) -> None:
    async with registry_store.read() as tx:
        for page in (PageRequest(size=5), PageRequest(size=5, skip=10)):
            found = await tx.list_projects(None, page)
            assert (found.items, found.has_more, found.total) == ([], False, 0)


# --- runs, resolve, executors -------------------------------------------------------------------


async def test_runs_are_counted_once_and_refused_when_paused(registry_store: RegistryStore) -> None:
    owner, agent_type, project, agent = await _world(registry_store)
    visible = Visibility(owner, everything=False)
    later = T0 + timedelta(seconds=5)

    started = await registry_store.start_run(visible, agent.id, "run-1", later)
    retried = await registry_store.start_run(visible, agent.id, "run-1", later)
    second = await registry_store.start_run(visible, agent.id, "run-2", later)
    assert started is not None and retried is not None and second is not None
    assert (started.changed, retried.changed, second.changed) == (True, False, True)
    assert (second.agent.status, second.agent.runs_in_flight, second.agent.last_activity_at) == (
        AgentStatus.WORKING,
        2,
        later,
    )
    assert (started.project_updated_at, started.type_updated_at) == (
        project.updated_at,
        agent_type.updated_at,
    )

    first_done = await registry_store.finish_run(
        visible, agent.id, "run-1", later, completed=True, tokens_used=10, cost=0.5
    )
    again = await registry_store.finish_run(
        visible, agent.id, "run-1", later, completed=True, tokens_used=10, cost=0.5
    )
    last_done = await registry_store.finish_run(
        visible, agent.id, "run-2", later, completed=False, tokens_used=5, cost=0.25
    )
    assert first_done is not None and again is not None and last_done is not None
    assert (first_done.changed, first_done.agent.status) == (True, AgentStatus.WORKING)
    assert not again.changed
    final = last_done.agent
    assert (final.status, final.runs_in_flight, final.tasks_completed, final.tokens_used, final.cost) == (
        AgentStatus.IDLE,
        0,
        1,
        15,
        0.75,
    )

    async with registry_store.write() as tx:
        await tx.update_agent(final.model_copy(update={"status": AgentStatus.PAUSED}))
    refused = await registry_store.start_run(visible, agent.id, "run-3", later)
    assert refused is not None and not refused.changed and refused.agent.status == AgentStatus.PAUSED


async def test_runs_of_agents_a_caller_may_not_see_are_not_found(registry_store: RegistryStore) -> None:
    _, _, _, agent = await _world(registry_store)
    stranger = Visibility(_id(), everything=False)
    assert await registry_store.start_run(stranger, agent.id, "run-1", T0) is None
    assert (
        await registry_store.finish_run(
            stranger, agent.id, "run-1", T0, completed=True, tokens_used=0, cost=0
        )
        is None
    )
    assert await registry_store.start_run(Visibility(_id(), everything=True), _id(), "run-1", T0) is None
    superuser = await registry_store.start_run(Visibility(_id(), everything=True), agent.id, "run-1", T0)
    assert superuser is not None and superuser.changed


async def test_resolve_reads_the_project_its_agent_and_the_type(registry_store: RegistryStore) -> None:
    _, agent_type, project, agent = await _world(registry_store)
    assert await registry_store.resolve("books", "worker") == (project, agent, agent_type)
    assert await registry_store.resolve("books", "nobody") == (project, None, None)
    assert await registry_store.resolve("nowhere", "worker") == (None, None, None)


async def test_executors_are_listed_by_heartbeat(registry_store: RegistryStore) -> None:
    async with registry_store.write() as tx:
        await tx.upsert_executor(Executor(id="b", address="127.0.0.1:2", heartbeat_at=T0))
        await tx.upsert_executor(
            Executor(id="a", address="127.0.0.1:1", heartbeat_at=T0 - timedelta(seconds=60))
        )
    async with registry_store.write() as tx:
        await tx.upsert_executor(
            Executor(id="a", address="127.0.0.1:9", heartbeat_at=T0 + timedelta(seconds=1))
        )
    async with registry_store.read() as tx:
        assert [e.id for e in await tx.list_executors(T0 - timedelta(seconds=120))] == ["a", "b"]
        assert await tx.list_executors(T0 + timedelta(seconds=1)) == [
            Executor(id="a", address="127.0.0.1:9", heartbeat_at=T0 + timedelta(seconds=1))
        ]


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_executors_drop_out_when_their_heartbeat_is_stale(registry_store: RegistryStore) -> None:
    # Membership is the registry's rule over the store, on a clock the test controls: no test may
    # hang on sub-second wall-clock margins (a 0.3 s TTL failed under load).
    clock = FakeClock(T0)
    registry = ExecutorPool(registry_store, executor_ttl_seconds=30, clock=clock)
    await registry.register_executor("old", "127.0.0.1:7001")
    clock.now += timedelta(seconds=40)
    await registry.register_executor("fresh", "127.0.0.1:7002")
    assert [e.id for e in await registry.list_executors()] == ["fresh"]
    await registry.register_executor("old", "127.0.0.1:7001")
    assert [e.id for e in await registry.list_executors()] == ["fresh", "old"]
    clock.now += timedelta(seconds=30)
    assert [e.id for e in await registry.list_executors()] == ["fresh", "old"]  # the TTL is inclusive
    clock.now += timedelta(microseconds=1000)
    assert await registry.list_executors() == []
