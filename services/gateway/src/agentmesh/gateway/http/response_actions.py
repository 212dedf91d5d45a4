"""What OpenAI's Responses API does to a response besides creating and reading it, at the root
and on the agent's own route: cancelling it (`POST /v1/responses/{response_id}/cancel`), deleting
it (`DELETE /v1/responses/{response_id}`) and listing its input items
(`GET /v1/responses/{response_id}/input_items`).

A response is its run (decision 0030): cancelling it cancels the run on whichever executor holds
it, as an A2A task's cancel does, and answers the response once its end is recorded — `cancelled`.
A response that has ended (answered, failed, or waiting for the client's tools, which reads
`completed` as the create call answered it) cannot be cancelled: a 400 in OpenAI's shape, as
OpenAI answers cancelling a response that is not in progress. Its input items are what its run
was given, from the run's events: the user's message, then each of the client's tool results (and
answers to the run's questions) that resumed it.

Deleting a response erases its run's events from the session's log (decision 0049) — which is
possible when the response is its session's only turn (created without `previous_response_id` and
not continued): the log holds nothing else to keep. It must have ended: one in progress is a 400
(cancel it first), as is one waiting for input (its run goes on with the answer), and one whose
session holds other turns (deleting it would leave a conversation with a hole in it).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from agentmesh.gateway.errors import (
    InvalidParameterValue,
    ResponseNotCancellable,
    ResponseNotDeletable,
    ResponseNotFound,
)
from agentmesh.gateway.http.agents import AGENT_BASE, resolve_agent
from agentmesh.gateway.http.context import HttpContext
from agentmesh.gateway.http.openai import ERROR_RESPONSES, Auth, Ctx
from agentmesh.gateway.http.response_reads import FoundResponse, found_response, read_response
from agentmesh.gateway.http.responses import ResponseObject, read_back
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.gateway.resume import follow_run, json_content
from agentmesh.memory.v1 import resources_pb2
from agentmesh.runtime.errors import FailedPrecondition, NotFound

EventType = resources_pb2.EventType

# How long a cancel waits for the run's end to be recorded before answering the response as it
# stands (an executor that cannot be reached records nothing).
CANCEL_WAIT_SECONDS = 30.0


class DeletedResponse(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: Literal[True] = True


class InputText(BaseModel):
    type: Literal["input_text"] = "input_text"
    text: str


class InputMessageItem(BaseModel):
    type: Literal["message"] = "message"
    id: str
    role: Literal["user"] = "user"
    status: Literal["completed"] = "completed"
    content: list[InputText]


class FunctionCallOutputItem(BaseModel):
    type: Literal["function_call_output"] = "function_call_output"
    id: str
    call_id: str
    output: str
    status: Literal["completed"] = "completed"


InputItem = InputMessageItem | FunctionCallOutputItem


class InputItemList(BaseModel):
    object: Literal["list"] = "list"
    data: list[InputItem]
    first_id: str | None
    last_id: str | None
    has_more: bool


@dataclass(frozen=True)
class ItemPaging:
    """OpenAI's paging of a list: how many, in which order, after which item."""

    limit: Annotated[int, Query(description="how many items, 1 to 100")] = 20
    order: Annotated[str, Query(description="`desc` (newest first, the default) or `asc`")] = "desc"
    after: Annotated[str | None, Query(description="list the items after this item id")] = None


Paging = Annotated[ItemPaging, Depends()]


def response_actions_router() -> APIRouter:
    router = APIRouter(tags=["OpenAI-compatible"], responses=ERROR_RESPONSES)

    @router.post("/v1/responses/{response_id}/cancel", response_model=ResponseObject)
    async def cancel_response(response_id: str, request: Request, ctx: Ctx, caller: Auth) -> ResponseObject:
        """Cancels a response in progress (its run); its project is the API key's, or its
        session's."""
        return await _cancel(ctx, caller, await found_response(request, ctx, caller, response_id))

    @router.post(AGENT_BASE + "/v1/responses/{response_id}/cancel", response_model=ResponseObject)
    async def agent_cancel_response(
        project_slug: str, agent_name: str, response_id: str, request: Request, ctx: Ctx, caller: Auth
    ) -> ResponseObject:
        """Cancels one of this agent's responses in progress."""
        found = await found_response(request, ctx, caller, response_id, AgentRef(project_slug, agent_name))
        return await _cancel(ctx, caller, found)

    @router.delete("/v1/responses/{response_id}", response_model=DeletedResponse)
    async def delete_response(response_id: str, request: Request, ctx: Ctx, caller: Auth) -> DeletedResponse:
        """Deletes a response that ended and is its session's only turn: its run's events are
        erased, and reading it, continuing it or deleting it again is a 404 from then on."""
        return await _delete(ctx, await found_response(request, ctx, caller, response_id))

    @router.delete(AGENT_BASE + "/v1/responses/{response_id}", response_model=DeletedResponse)
    async def agent_delete_response(
        project_slug: str, agent_name: str, response_id: str, request: Request, ctx: Ctx, caller: Auth
    ) -> DeletedResponse:
        """Deletes one of this agent's responses that ended and is its session's only turn."""
        found = await found_response(request, ctx, caller, response_id, AgentRef(project_slug, agent_name))
        return await _delete(ctx, found)

    @router.get("/v1/responses/{response_id}/input_items", response_model=InputItemList)
    async def list_input_items(
        response_id: str, request: Request, ctx: Ctx, caller: Auth, paging: Paging
    ) -> InputItemList:
        """The response's input items, a page at a time."""
        found = await found_response(request, ctx, caller, response_id)
        return input_item_page(found.recorded.events, paging)

    @router.get(AGENT_BASE + "/v1/responses/{response_id}/input_items", response_model=InputItemList)
    async def agent_list_input_items(
        project_slug: str,
        agent_name: str,
        response_id: str,
        request: Request,
        ctx: Ctx,
        caller: Auth,
        paging: Paging,
    ) -> InputItemList:
        """One of this agent's responses' input items, a page at a time."""
        found = await found_response(request, ctx, caller, response_id, AgentRef(project_slug, agent_name))
        return input_item_page(found.recorded.events, paging)

    return router


async def _cancel(ctx: HttpContext, caller: Caller, found: FoundResponse) -> ResponseObject:
    """Cancels the response's run and answers the response once the run's end is recorded."""
    status = found.recorded.status
    if status == "cancelled":
        return read_back(found)  # cancelled already: as OpenAI answers a second cancel
    if status != "in_progress":
        _refuse(found)
    spec = await resolve_agent(ctx, caller, found.project_slug, found.recorded.agent)
    cancelled = await ctx.gateway.cancel_run(
        caller, found.project_id, spec.agent.id, found.at.run_id, reason="the response was cancelled"
    )
    if cancelled:
        ended = follow_run(
            ctx.memory,
            found.at.session_id,
            project_id=found.project_id,
            after_seq=found.recorded.last_seq,
            run_id=found.at.run_id,
            metadata=caller.metadata,
        )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CANCEL_WAIT_SECONDS), contextlib.aclosing(ended):
                async for _ in ended:
                    pass
    now = await read_response(ctx, caller, found.at, project_id=found.project_id)
    found = FoundResponse(found.at, now, found.project_id, found.project_slug)
    if not cancelled and now.status == "in_progress":
        # No executor holds it: it waits on a request for input of a run it delegated to.
        raise ResponseNotCancellable(
            str(found.at), "it waits for input a run it delegated to asked for: answer that request"
        )
    if now.status not in ("in_progress", "cancelled"):
        _refuse(found)  # it ended before the cancel reached it
    return read_back(found)


async def _delete(ctx: HttpContext, found: FoundResponse) -> DeletedResponse:
    """Erases the response's run from its session's log, once it ended and is the only turn."""
    recorded, response_id = found.recorded, str(found.at)
    if recorded.status == "in_progress":
        raise ResponseNotDeletable(response_id, "it is in progress: cancel it first")
    if recorded.waiting:
        raise ResponseNotDeletable(
            response_id, "its run waits for input: answer it, or cancel the run, first"
        )
    try:
        await ctx.gateway.erase_run(found.project_id, found.at.session_id, found.at.run_id)
    except NotFound:  # erased meanwhile by another delete
        raise ResponseNotFound(response_id) from None
    except FailedPrecondition:
        raise ResponseNotDeletable(
            response_id, "its session holds other turns too (it was continued, or continues another)"
        ) from None
    return DeletedResponse(id=response_id)


def _refuse(found: FoundResponse) -> None:
    recorded = found.recorded
    if recorded.status == "completed" and recorded.calls:
        why = "it waits for the client's tool results: send them (function_call_output) to go on"
    else:
        why = f"it is {recorded.status}; only a response in progress can be cancelled"
    raise ResponseNotCancellable(str(found.at), why)


def input_items(events: list[resources_pb2.Event]) -> list[InputItem]:
    """What the run was given, oldest first: its input message, and each answer it was resumed
    with — a client tool's result as its `function_call_output`, a person's answer as a message."""
    client_calls = {
        json_content(event.content).get("request_id")
        for event in events
        if event.event_type == EventType.EVENT_TYPE_INPUT_REQUESTED
        and json_content(event.content).get("kind") == "client_tool"
    }
    items: list[InputItem] = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_USER_MESSAGE:
            items.append(InputMessageItem(id=f"msg_{event.id}", content=[InputText(text=event.content)]))
        elif event.event_type == EventType.EVENT_TYPE_INPUT_RECEIVED:
            body: dict[str, Any] = json_content(event.content)
            answer = str(body.get("answer") or "")
            if body.get("request_id") in client_calls:
                items.append(
                    FunctionCallOutputItem(
                        id=f"fco_{event.id}", call_id=str(body["request_id"]), output=answer
                    )
                )
            elif answer:
                items.append(InputMessageItem(id=f"msg_{event.id}", content=[InputText(text=answer)]))
    return items


def input_item_page(events: list[resources_pb2.Event], paging: ItemPaging) -> InputItemList:
    """A page of the run's input items, in the paging's order, after the item it names."""
    limit, order, after = paging.limit, paging.order, paging.after
    if not 1 <= limit <= 100:
        raise InvalidParameterValue("limit", "must be between 1 and 100")
    if order not in ("asc", "desc"):
        raise InvalidParameterValue("order", "must be 'asc' or 'desc'")
    items = input_items(events)
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [item.id for item in items]
        if after not in ids:
            raise InvalidParameterValue("after", f"{after!r} is no input item of this response")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return InputItemList(
        data=page,
        first_id=page[0].id if page else None,
        last_id=page[-1].id if page else None,
        has_more=len(items) > limit,
    )
