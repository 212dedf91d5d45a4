"""Agent versions over REST: an agent's versions (`GET …/agents/{agent_id}/versions`, newest
first, `…/versions/{number}`, compared by `…/versions/{number}/diff`, rolled back to by
`POST …/versions/{number}/restore`), and moving a session to a version
(`POST …/sessions/{session_id}/move`) or every session of an agent (`POST
…/agents/{agent_id}/sessions/move`); thin adapters to the registry's ListAgentVersions,
GetAgentVersion, DiffAgentVersions, RestoreAgentVersion, MoveSession and MoveAgentSessions, for
the project's owner, superusers and API keys scoped to the project."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from google.protobuf import json_format
from pydantic import BaseModel, Field

from agentmesh.gateway.http import convert, schemas
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]
PageNumber = Annotated[int, Query(ge=1, le=schemas.INT32_MAX, description="1-based page number")]
VersionNumber = Annotated[int, Path(ge=1, le=schemas.INT32_MAX, description="the version's number")]
Against = Annotated[
    int, Query(ge=0, le=schemas.INT32_MAX, description="the version compared against (0: the one before)")
]
PageSize = Annotated[int, Query(ge=1, le=1000, description="items per page, at most 1000")]


class AgentVersionOut(BaseModel):
    """One immutable snapshot of what the agent's runs use: its type as it was and its config."""

    agent_id: str
    project_id: str
    number: int = Field(description="1 for the agent's first version, then one more for each")
    agent_type: schemas.AgentTypeOut = Field(description="the agent's type as it was (secrets masked)")
    config: schemas.AgentConfigOut = Field(description="the agent's config overrides as they were")
    created_at: datetime | None
    created_by: str = Field(description="the user who made the change; empty when the registry did")


TargetVersion = Annotated[int, Field(ge=1, le=schemas.INT32_MAX)] | Literal["latest"]


class SessionMove(schemas.RequestBody):
    """Where to move the session: a version number of the agent, or `latest`."""

    version: TargetVersion = Field(description="a version number (1 or more), or latest")
    agent: str = Field(
        default="",
        max_length=200,
        description="the agent (id, slug or name); empty: the one the session has run (with latest: each)",
    )


class AgentSessionsMove(schemas.RequestBody):
    """Where to move every session of the agent: one of its version numbers, or `latest`."""

    version: TargetVersion = Field(description="a version number (1 or more), or latest")


class AgentSessionsMoveOut(BaseModel):
    agent_id: str
    version: int = Field(description="the version the agent's sessions use now")
    moved_sessions: int = Field(description="how many sessions moved (those already on it are not counted)")
    sessions: int = Field(description="how many sessions have run the agent")


class FieldChangeOut(BaseModel):
    field: str = Field(description="config.<field> (an override) or agent_type.<field>")
    before: Any = Field(description="its value in the version compared against (null: not set)")
    after: Any = Field(description="its value in the version compared (null: not set)")


class AgentVersionDiffOut(BaseModel):
    number: int
    against: int
    changes: list[FieldChangeOut] = Field(description="the fields that differ, in name order")


class SessionAgentVersionOut(BaseModel):
    agent_id: str
    version: int


class SessionMoveOut(BaseModel):
    session_id: str
    versions: list[SessionAgentVersionOut] = Field(description="the versions its runs use now, by agent")


def agent_version_out(value: resources_pb2.AgentVersion) -> AgentVersionOut:
    return AgentVersionOut(
        agent_id=value.agent_id,
        project_id=value.project_id,
        number=value.number,
        agent_type=convert.agent_type(value.agent_type),
        config=convert.agent_config(value.config),
        created_at=convert.timestamp(value.created_at),
        created_by=value.created_by,
    )


def agent_version_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1/projects/{project_id}")

    @router.get("/agents/{agent_id}/versions", tags=["agents"])
    async def list_agent_versions(
        project_id: str, agent_id: str, ctx: Ctx, caller: Auth, page: PageNumber = 1, page_size: PageSize = 50
    ) -> schemas.Page[AgentVersionOut]:
        """The agent's versions, newest first, paged. 404 for an unknown agent."""
        request = reg.ListAgentVersionsRequest(
            project_id=project_id, agent_id=agent_id, page=page, page_size=page_size
        )
        response = await ctx.call(ctx.registry.stub.ListAgentVersions, request, caller)
        return schemas.Page[AgentVersionOut](
            data=[agent_version_out(v) for v in response.versions],
            pagination=convert.pagination(response.total_size, page, page_size),
        )

    @router.get("/agents/{agent_id}/versions/{number}", tags=["agents"])
    async def get_agent_version(
        project_id: str,
        agent_id: str,
        number: VersionNumber,
        ctx: Ctx,
        caller: Auth,
    ) -> AgentVersionOut:
        """One version of the agent. 404 for an unknown agent or a number it does not have."""
        request = reg.GetAgentVersionRequest(project_id=project_id, agent_id=agent_id, number=number)
        return agent_version_out((await ctx.call(ctx.registry.stub.GetAgentVersion, request, caller)).version)

    @router.get("/agents/{agent_id}/versions/{number}/diff", tags=["agents"])
    async def diff_agent_versions(
        project_id: str,
        agent_id: str,
        number: VersionNumber,
        ctx: Ctx,
        caller: Auth,
        against: Against = 0,
    ) -> AgentVersionDiffOut:
        """The fields that differ from version `against` to version `number`. 404 for an unknown
        agent or a number it does not have."""
        request = reg.DiffAgentVersionsRequest(
            project_id=project_id, agent_id=agent_id, number=number, against=against
        )
        response = await ctx.call(ctx.registry.stub.DiffAgentVersions, request, caller)
        changes = [
            FieldChangeOut(field=c.field, before=_plain(c.before), after=_plain(c.after))
            for c in response.changes
        ]
        return AgentVersionDiffOut(number=number, against=against or number - 1, changes=changes)

    @router.post("/agents/{agent_id}/versions/{number}/restore", tags=["agents"])
    async def restore_agent_version(
        project_id: str, agent_id: str, number: VersionNumber, ctx: Ctx, caller: Auth
    ) -> AgentVersionOut:
        """Rolls the agent back to version `number`: its config overrides become that version's,
        which makes a new version (its type, shared with other agents, stays as it is); answers
        the agent's latest version. 404 for an unknown agent or version, 400 when terminated."""
        request = reg.RestoreAgentVersionRequest(project_id=project_id, agent_id=agent_id, number=number)
        response = await ctx.call(ctx.registry.stub.RestoreAgentVersion, request, caller)
        return agent_version_out(response.version)

    @router.post("/sessions/{session_id}/move", tags=["sessions"])
    async def move_session(
        project_id: str, session_id: str, body: SessionMove, ctx: Ctx, caller: Auth
    ) -> SessionMoveOut:
        """Moves the session's runs of an agent to one of its versions, or to its latest: its next
        run uses it. 404 for an unknown agent or version, 400 when the session has run several
        agents and none is named."""
        latest = body.version == "latest"
        request = reg.MoveSessionRequest(
            project_id=project_id,
            session_id=session_id,
            agent_id=body.agent,
            version=0 if latest else int(body.version),
            latest=latest,
        )
        response = await ctx.call(ctx.registry.stub.MoveSession, request, caller)
        versions = [SessionAgentVersionOut(agent_id=v.agent_id, version=v.version) for v in response.versions]
        return SessionMoveOut(session_id=session_id, versions=versions)

    @router.post("/agents/{agent_id}/sessions/move", tags=["agents"])
    async def move_agent_sessions(
        project_id: str, agent_id: str, body: AgentSessionsMove, ctx: Ctx, caller: Auth
    ) -> AgentSessionsMoveOut:
        """Moves every session that has run the agent to one of its versions, or to its latest:
        their next runs use it. 404 for an unknown agent or version."""
        latest = body.version == "latest"
        request = reg.MoveAgentSessionsRequest(
            project_id=project_id,
            agent_id=agent_id,
            version=0 if latest else int(body.version),
            latest=latest,
        )
        response = await ctx.call(ctx.registry.stub.MoveAgentSessions, request, caller)
        return AgentSessionsMoveOut(
            agent_id=response.agent_id,
            version=response.version,
            moved_sessions=response.moved_sessions,
            sessions=response.sessions,
        )

    return router


def _plain(value: Any) -> Any:
    return json_format.MessageToDict(value)
