"""The REST/JSON API (DESIGN §6): thin adapters from JSON to the registry's and the memory
service's RPCs, called as the signed-in user. Who may call each route is decided by the policy
table before a handler runs; the services check again as the caller."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Protocol, TypeVar

from fastapi import APIRouter, Depends, Query, Response
from google.protobuf import field_mask_pb2

from agentmesh.gateway.errors import InvalidRequest
from agentmesh.gateway.http import convert, schemas, session_schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import Caller
from agentmesh.memory.v1 import memory_service_pb2 as mem
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
PageNumber = Annotated[int, Query(ge=1, le=schemas.INT32_MAX, description="1-based page number")]
PageSize = Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")]
PageToken = Annotated[str, Query(max_length=4096, description="token from a previous page")]


def _mask(fields: set[str], prefix: str = "") -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=sorted(prefix + name for name in fields))


def rest_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1")

    # Identity.

    @router.post("/auth/register", status_code=201, tags=["auth"])
    async def register(body: schemas.RegisterRequest, ctx: Ctx, caller: Auth) -> schemas.UserOut:
        """Registers a user, as the registry's registration mode allows: 403 while registration is
        closed (`REGISTRATION_CLOSED`) or, when invite-only, without a valid unused
        `invitation_token` (`INVITATION_INVALID`). A taken e-mail is never confirmed: the answer
        looks like a new registration, but nothing is created or changed."""
        request = reg.RegisterUserRequest(**body.model_dump())
        return convert.user((await ctx.call(ctx.registry.stub.RegisterUser, request, caller)).user)

    @router.post("/auth/login", tags=["auth"])
    async def login(body: schemas.LoginRequest, ctx: Ctx, caller: Auth) -> schemas.TokensOut:
        """Exchanges e-mail and password for tokens. 401 on bad credentials (unknown e-mails
        alike); 429 while this account is throttled from the client's address, or the address is."""
        request = reg.LoginRequest(email=body.email, password=body.password)
        return convert.tokens((await ctx.call(ctx.registry.stub.Login, request, caller)).tokens)

    @router.post("/auth/refresh", tags=["auth"])
    async def refresh(body: schemas.RefreshRequest, ctx: Ctx, caller: Auth) -> schemas.TokensOut:
        """Exchanges a refresh token for new tokens; the old one stops working."""
        request = reg.RefreshTokensRequest(refresh_token=body.refresh_token)
        return convert.tokens((await ctx.call(ctx.registry.stub.RefreshTokens, request, caller)).tokens)

    @router.post("/auth/logout", tags=["auth"])
    async def logout(body: schemas.RefreshRequest, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Revokes a refresh token and every token rotated from the same sign-in."""
        request = reg.RevokeRefreshTokenRequest(refresh_token=body.refresh_token)
        await ctx.call(ctx.registry.stub.RevokeRefreshToken, request, caller)
        return schemas.MessageOut(message="signed out")

    @router.get("/users/me", tags=["auth"])
    async def me(ctx: Ctx, caller: Auth) -> schemas.UserOut:
        """The signed-in user."""
        response = await ctx.call(ctx.registry.stub.GetCurrentUser, reg.GetCurrentUserRequest(), caller)
        return convert.user(response.user)

    @router.patch("/users/{user_id}", tags=["auth"])
    async def update_user(user_id: str, body: schemas.UserUpdate, ctx: Ctx, caller: Auth) -> schemas.UserOut:
        """Deactivates, reactivates, promotes or demotes a user (superusers). The user's access
        tokens stop working at once (within a second on every gateway)."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            raise InvalidRequest.field("body", "name is_active or is_superuser to change")
        request = reg.UpdateUserRequest(
            user=resources_pb2.User(id=user_id, **fields), update_mask=_mask(set(fields))
        )
        return convert.user((await ctx.call(ctx.registry.stub.UpdateUser, request, caller)).user)

    # Agent types.

    @router.post("/agent-types", status_code=201, tags=["agent types"])
    async def create_agent_type(
        body: schemas.AgentTypeCreate, ctx: Ctx, caller: Auth, response: Response
    ) -> schemas.AgentTypeOut:
        """Creates an agent type (superusers). 409 when the slug is taken. A model or tool no
        running executor can serve comes back as a `Warning` header."""
        request = reg.CreateAgentTypeRequest(agent_type=convert.agent_type_proto(body.model_dump()))
        created = await ctx.call(ctx.registry.stub.CreateAgentType, request, caller)
        return convert.agent_type(_warned(response, created).agent_type)

    @router.get("/agent-types", tags=["agent types"])
    async def list_agent_types(
        ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[schemas.AgentTypeOut]:
        """Lists agent types, paged."""
        request = reg.ListAgentTypesRequest(page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListAgentTypes, request, caller)
        return schemas.Page[schemas.AgentTypeOut](
            data=[convert.agent_type(t) for t in response.agent_types],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/agent-types/slug/{slug}", tags=["agent types"])
    async def get_agent_type_by_slug(slug: str, ctx: Ctx, caller: Auth) -> schemas.AgentTypeOut:
        """One agent type, by slug."""
        request = reg.GetAgentTypeRequest(slug=slug)
        return convert.agent_type(
            (await ctx.call(ctx.registry.stub.GetAgentType, request, caller)).agent_type
        )

    @router.get("/agent-types/{agent_type_id}", tags=["agent types"])
    async def get_agent_type(agent_type_id: str, ctx: Ctx, caller: Auth) -> schemas.AgentTypeOut:
        """One agent type, by id."""
        request = reg.GetAgentTypeRequest(id=agent_type_id)
        return convert.agent_type(
            (await ctx.call(ctx.registry.stub.GetAgentType, request, caller)).agent_type
        )

    @router.patch("/agent-types/{agent_type_id}", tags=["agent types"])
    async def update_agent_type(
        agent_type_id: str, body: schemas.AgentTypeUpdate, ctx: Ctx, caller: Auth, response: Response
    ) -> schemas.AgentTypeOut:
        """Changes the fields present in the body (superusers); the others stay as they are."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            request = reg.GetAgentTypeRequest(id=agent_type_id)
            return convert.agent_type(
                (await ctx.call(ctx.registry.stub.GetAgentType, request, caller)).agent_type
            )
        update = reg.UpdateAgentTypeRequest(
            agent_type=convert.agent_type_proto(fields, id=agent_type_id), update_mask=_mask(set(fields))
        )
        updated = await ctx.call(ctx.registry.stub.UpdateAgentType, update, caller)
        return convert.agent_type(_warned(response, updated).agent_type)

    @router.delete("/agent-types/{agent_type_id}", tags=["agent types"])
    async def delete_agent_type(agent_type_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Deletes an agent type (superusers). 409 while agents use it."""
        await ctx.call(
            ctx.registry.stub.DeleteAgentType, reg.DeleteAgentTypeRequest(id=agent_type_id), caller
        )
        return schemas.MessageOut(message=f"agent type {agent_type_id} deleted")

    # Projects.

    @router.post("/projects", status_code=201, tags=["projects"])
    async def create_project(body: schemas.ProjectCreate, ctx: Ctx, caller: Auth) -> schemas.ProjectOut:
        """Creates a project owned by the caller. 409 when the slug is taken."""
        request = reg.CreateProjectRequest(project=convert.project_proto(body.model_dump()))
        return convert.project((await ctx.call(ctx.registry.stub.CreateProject, request, caller)).project)

    @router.get("/projects", tags=["projects"])
    async def list_projects(
        ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[schemas.ProjectOut]:
        """The projects the caller may see (all of them for superusers), paged."""
        request = reg.ListProjectsRequest(page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListProjects, request, caller)
        return schemas.Page[schemas.ProjectOut](
            data=[convert.project(p) for p in response.projects],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/projects/{project_id}", tags=["projects"])
    async def get_project(project_id: str, ctx: Ctx, caller: Auth) -> schemas.ProjectOut:
        """One project (its owner and superusers only; 404 to anyone else)."""
        request = reg.GetProjectRequest(id=project_id)
        return convert.project((await ctx.call(ctx.registry.stub.GetProject, request, caller)).project)

    @router.patch("/projects/{project_id}", tags=["projects"])
    async def update_project(
        project_id: str, body: schemas.ProjectUpdate, ctx: Ctx, caller: Auth
    ) -> schemas.ProjectOut:
        """Changes the fields present in the body."""
        fields = body.model_dump(include=body.model_fields_set)
        if not fields:
            request = reg.GetProjectRequest(id=project_id)
            return convert.project((await ctx.call(ctx.registry.stub.GetProject, request, caller)).project)
        update = reg.UpdateProjectRequest(
            project=convert.project_proto(fields, id=project_id), update_mask=_mask(set(fields))
        )
        return convert.project((await ctx.call(ctx.registry.stub.UpdateProject, update, caller)).project)

    @router.delete("/projects/{project_id}", tags=["projects"])
    async def delete_project(project_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Deletes a project, its agents, and its sessions with their events."""
        await ctx.gateway.delete_project(caller, project_id)
        return schemas.MessageOut(message=f"project {project_id} deleted")

    # Agents.

    @router.post("/projects/{project_id}/agents", status_code=201, tags=["agents"])
    async def spawn_agent(
        project_id: str, body: schemas.AgentCreate, ctx: Ctx, caller: Auth, response: Response
    ) -> schemas.AgentOut:
        """Spawns an agent from an active type; it starts idle. 422 when the type is inactive,
        409 when the name or slug is taken in the project (by a terminated agent too, unless
        `replace_terminated`). A model or tool no running executor
        can serve comes back as a `Warning` header."""
        if body.project_id is not None and body.project_id != project_id:
            raise InvalidRequest.field("project_id", "must be the project in the path")
        agent = reg.CreateAgentRequest(
            agent=resources_pb2.Agent(
                project_id=project_id,
                agent_type_id=body.agent_type_id,
                name=body.name,
                slug=body.slug,
                config=convert.agent_config_proto(body.config.model_dump()),
                public=body.public,
            ),
            replace_terminated=body.replace_terminated,
        )
        created = await ctx.call(ctx.registry.stub.CreateAgent, agent, caller)
        return convert.agent(_warned(response, created).agent)

    @router.get("/projects/{project_id}/agents", tags=["agents"])
    async def list_agents(
        project_id: str, ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[schemas.AgentOut]:
        """The project's agents, paged."""
        request = reg.ListAgentsRequest(project_id=project_id, page=page, page_size=page_size)
        response = await ctx.call(ctx.registry.stub.ListAgents, request, caller)
        return schemas.Page[schemas.AgentOut](
            data=[convert.agent(a) for a in response.agents],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/projects/{project_id}/agents/{agent_id}", tags=["agents"])
    async def get_agent(project_id: str, agent_id: str, ctx: Ctx, caller: Auth) -> schemas.AgentOut:
        """One agent, by its id, slug or exact name."""
        request = reg.GetAgentRequest(project_id=project_id, id=agent_id)
        return convert.agent((await ctx.call(ctx.registry.stub.GetAgent, request, caller)).agent)

    @router.patch("/projects/{project_id}/agents/{agent_id}", tags=["agents"])
    async def update_agent(
        project_id: str, agent_id: str, body: schemas.AgentUpdate, ctx: Ctx, caller: Auth, response: Response
    ) -> schemas.AgentOut:
        """Changes the config overrides present in the body (null drops an override) and, when
        present, `public`."""
        overrides = body.config.model_fields_set if body.config is not None else set()
        publish = {"public"} & body.model_fields_set
        if not overrides and not publish:
            request = reg.GetAgentRequest(project_id=project_id, id=agent_id)
            return convert.agent((await ctx.call(ctx.registry.stub.GetAgent, request, caller)).agent)
        config = body.config.model_dump(include=overrides) if body.config is not None else {}
        update = reg.UpdateAgentRequest(
            agent=resources_pb2.Agent(
                project_id=project_id,
                id=agent_id,
                config=convert.agent_config_proto(config),
                public=bool(body.public),
            ),
            update_mask=field_mask_pb2.FieldMask(paths=[*_mask(overrides, "config.").paths, *publish]),
        )
        updated = await ctx.call(ctx.registry.stub.UpdateAgent, update, caller)
        return convert.agent(_warned(response, updated).agent)

    @router.delete("/projects/{project_id}/agents/{agent_id}", tags=["agents"])
    async def terminate_agent(project_id: str, agent_id: str, ctx: Ctx, caller: Auth) -> schemas.MessageOut:
        """Terminates an agent (final)."""
        message = await ctx.gateway.terminate_agent(caller, project_id, agent_id)
        return schemas.MessageOut(message=message or f"agent {agent_id} terminated")

    @router.post("/projects/{project_id}/agents/{agent_id}/pause", tags=["agents"])
    async def pause_agent(project_id: str, agent_id: str, ctx: Ctx, caller: Auth) -> schemas.AgentOut:
        """Pauses an idle or working agent. 400 from any other state (an invalid transition)."""
        request = reg.PauseAgentRequest(project_id=project_id, id=agent_id)
        return convert.agent((await ctx.call(ctx.registry.stub.PauseAgent, request, caller)).agent)

    @router.post("/projects/{project_id}/agents/{agent_id}/resume", tags=["agents"])
    async def resume_agent(project_id: str, agent_id: str, ctx: Ctx, caller: Auth) -> schemas.AgentOut:
        """Resumes a paused agent. 400 from any other state (an invalid transition)."""
        request = reg.ResumeAgentRequest(project_id=project_id, id=agent_id)
        return convert.agent((await ctx.call(ctx.registry.stub.ResumeAgent, request, caller)).agent)

    @router.get("/projects/{project_id}/agents/{agent_id}/metrics", tags=["agents"])
    async def agent_metrics(
        project_id: str, agent_id: str, ctx: Ctx, caller: Auth
    ) -> schemas.AgentMetricsOut:
        """Usage figures of one agent."""
        request = reg.GetAgentMetricsRequest(project_id=project_id, id=agent_id)
        return convert.agent_metrics(await ctx.call(ctx.registry.stub.GetAgentMetrics, request, caller))

    # Sessions and their events (memory service; the project check ran in the policy).

    @router.get("/projects/{project_id}/sessions", tags=["sessions"])
    async def list_sessions(
        project_id: str,
        ctx: Ctx,
        caller: Auth,
        page: PageNumber = 1,
        page_size: PageSize = 50,
        page_token: PageToken = "",
    ) -> session_schemas.SessionPage:
        """The project's sessions, most recently active first. Page by `page_token` (cheapest) or
        by `page` number."""
        response = await ctx.gateway.list_sessions(
            caller, project_id, page_size=page_size, page_token=page_token, page=page
        )
        return session_schemas.SessionPage(
            data=[convert.session(s) for s in response.sessions],
            pagination=convert.pagination(response.total_size, page, page_size),
            next_page_token=response.next_page_token,
        )

    @router.get("/projects/{project_id}/sessions/{session_id}/events", tags=["sessions"])
    async def session_events(
        project_id: str,
        session_id: str,
        ctx: Ctx,
        caller: Auth,
        page_size: PageSize = 100,
        page_token: PageToken = "",
        after_seq: Annotated[int, Query(ge=0, le=2**63 - 1, description="only events after this seq")] = 0,
    ) -> session_schemas.SessionEventsOut:
        """Every event of the session, all agents', in `seq` order."""
        response = await ctx.gateway.session_events(
            caller, project_id, session_id, page_size=page_size, page_token=page_token, after_seq=after_seq
        )
        return session_schemas.SessionEventsOut(
            events=[convert.event(e) for e in response.events],
            next_page_token=response.next_page_token,
            byte_limit_reached=response.byte_limit_reached,
        )

    @router.post("/projects/{project_id}/sessions/{session_id}/reset", tags=["sessions"])
    async def reset_session(
        project_id: str, session_id: str, ctx: Ctx, caller: Auth
    ) -> session_schemas.SessionResetOut:
        """Resets the session: its agents are built afresh for its next message (new runtime,
        new frozen system prompt, new MCP connections). Its events stay."""
        released = await ctx.gateway.reset_session(caller, project_id, session_id)
        return session_schemas.SessionResetOut(session_id=session_id, released_agents=released)

    @router.post("/projects/{project_id}/sessions/{session_id}/fork", status_code=201, tags=["sessions"])
    async def fork_session(
        project_id: str, session_id: str, body: session_schemas.SessionFork, ctx: Ctx, caller: Auth
    ) -> session_schemas.SessionOut:
        """Forks the session at `at_seq` into a new session of the project: the new one sees the
        history up to that event (read through, not copied) and goes its own way; the source is
        untouched. 404 for an unknown session, 400 when `at_seq` is past its end, 409 when
        `session_id` is taken."""
        request = mem.ForkSessionRequest(
            session_id=session_id, project_id=project_id, at_seq=body.at_seq, new_session_id=body.session_id
        )
        return convert.session((await ctx.call(ctx.memory.stub.ForkSession, request, caller)).session)

    return router


class _Declaration(Protocol):
    """A Create/Update response of the registry: the object, and what the registry noticed."""

    @property
    def warnings(self) -> Sequence[str]: ...


D = TypeVar("D", bound=_Declaration)


def _warned(response: Response, declared: D) -> D:
    """Passes a declaration's result through, its registry warnings added to the HTTP response as
    `Warning: 299 - "..."` headers — how the Kubernetes API server sends warnings (kubectl prints
    them). Header values are Latin-1: other characters become '?'."""
    for warning in declared.warnings:
        text = warning.replace("\\", "\\\\").replace('"', '\\"')
        text = text.encode("latin-1", "replace").decode("latin-1")
        response.headers.append("Warning", f'299 - "{text}"')
    return declared
