"""`GET /api/v1/projects/{project_id}/usage`: a project's spending from the cost ledger over REST
(the project's owner, superusers, API keys scoped to the project), a thin adapter to the
registry's SummarizeUsage. `group_by` names dimensions as the rest of the REST API writes enums:
`agent`, `user`, `model`, `session`, `day`."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.http import convert
from agentmesh.gateway.http.context import HttpContext, authorize, context
from agentmesh.gateway.models import Caller
from agentmesh.registry.v1 import registry_service_pb2 as reg

Ctx = Annotated[HttpContext, Depends(context)]
Auth = Annotated[Caller, Depends(authorize)]

DimensionName = Literal["agent", "user", "model", "session", "day"]
_DIMENSION = "USAGE_DIMENSION_"
_DAY = r"^\d{4}-\d{2}-\d{2}$"


class UsageGroupOut(BaseModel):
    """The usage of one group: the keys of the dimensions grouped by are set, the others empty."""

    agent_id: str
    agent: str = Field(description="the agent's slug when the calls were made")
    user_id: str
    model: str
    session_id: str
    day: str = Field(description="UTC day, YYYY-MM-DD")
    runs: int
    calls: int
    input_tokens: int = Field(description="prompt tokens, cached ones included")
    output_tokens: int
    cached_input_tokens: int
    cost: float | None = Field(description="US dollars; null when unknown (a model called has no price)")
    priced_cost: float = Field(description="US dollars of the calls whose model has a price")
    unpriced_models: list[str] = Field(description="the models called that have no price")


class UsageSummaryOut(BaseModel):
    groups: list[UsageGroupOut] = Field(description="sorted by the dimensions grouped by, at most 1000")
    total: UsageGroupOut = Field(description="every call in the range")
    truncated: bool = Field(description="more than 1000 groups: narrow the range or group by less")


def usage_group_out(group: reg.UsageGroup) -> UsageGroupOut:
    usage: run_pb2.Usage = group.usage
    return UsageGroupOut(
        agent_id=group.agent_id,
        agent=group.agent,
        user_id=group.user_id,
        model=group.model,
        session_id=group.session_id,
        day=group.day,
        runs=group.runs,
        calls=group.calls,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        cost=usage.cost if usage.cost_known else None,
        priced_cost=usage.cost,
        unpriced_models=list(usage.unpriced_models),
    )


def usage_router() -> APIRouter:
    router = APIRouter(prefix="/api/v1/projects/{project_id}/usage", tags=["usage"])

    @router.get("")
    async def summarize_usage(
        project_id: str,
        ctx: Ctx,
        caller: Auth,
        group_by: Annotated[
            list[DimensionName] | None, Query(description="dimensions to group by, in sort order")
        ] = None,
        start_day: Annotated[str, Query(pattern=_DAY, description="first UTC day counted")] = "",
        end_day: Annotated[str, Query(pattern=_DAY, description="last UTC day counted (inclusive)")] = "",
    ) -> UsageSummaryOut:
        """The project's spending from the cost ledger (every model call of its runs, priced when
        it was made), summed per group."""
        request = reg.SummarizeUsageRequest(
            project_id=project_id,
            group_by=[convert.enum_value(name, reg.UsageDimension, _DIMENSION) for name in group_by or []],
            start_day=start_day,
            end_day=end_day,
        )
        response = await ctx.call(ctx.registry.stub.SummarizeUsage, request, caller)
        return UsageSummaryOut(
            groups=[usage_group_out(group) for group in response.groups],
            total=usage_group_out(response.total),
            truncated=response.truncated,
        )

    return router
