"""The A2A request handler every binding calls (a2a-sdk's JSON-RPC and REST dispatchers on the
HTTP face, its GrpcHandler on the public gRPC port): A2A requests in, `A2ATasks` operations,
A2A responses out.

Who calls and which agent is addressed come with the call context: the HTTP face authorized the
caller and put both in its state (`CALLER`, `AGENT`); on gRPC the policy interceptor authorized
the caller against the request's `tenant` (`{project_slug}/{agent}`), which names the agent.
Errors leave as A2A errors (`TaskNotFoundError`, `InvalidParamsError`, …) on the HTTP bindings;
on gRPC, the gateway's own errors keep their status codes (NOT_FOUND, FAILED_PRECONDITION,
RESOURCE_EXHAUSTED, …) through the server's error interceptor.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.proto_utils import validate_proto_required_fields
from packaging.version import InvalidVersion, Version

from agentmesh.common.v1 import run_pb2
from agentmesh.gateway.a2a.card import A2AEndpoints, agent_card
from agentmesh.gateway.a2a.convert import TaskEventStream, message_text
from agentmesh.gateway.a2a.push import TaskPushConfigs
from agentmesh.gateway.a2a.tasks import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, A2ATasks, Agent
from agentmesh.gateway.access import current_caller
from agentmesh.gateway.errors import TaskNotFound
from agentmesh.gateway.models import AgentRef, Caller
from agentmesh.gateway.project_limits import OpenStreams
from agentmesh.runtime.errors import DomainError, FailedPrecondition, InvalidArgument, ResourceExhausted

CALLER = "agentmesh.caller"
AGENT = "agentmesh.agent"
BASE_URL = "agentmesh.base_url"
# The `status` a ListTasks request named, as the client wrote it: the HTTP bindings' parsers turn
# a name that is no TaskState into "no filter", so the HTTP face hands the text over to be checked.
REQUESTED_STATUS = "agentmesh.requested_status"


class MeshRequestHandler(RequestHandler):
    """A2A's operations on agentmesh agents (see the module docstring)."""

    def __init__(
        self,
        tasks: A2ATasks,
        endpoints: A2AEndpoints,
        *,
        push: TaskPushConfigs,
        streams: OpenStreams | None = None,
    ) -> None:
        self._tasks = tasks
        self._push = push
        self._endpoints = endpoints
        # Its streams hold slots of their caller and project, on every binding.
        self._streams = streams or OpenStreams()

    # Messages.

    async def on_message_send(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | a2a_pb2.Message:
        return await _a2a_errors(context, self._send(params, context))

    async def _send(self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext) -> a2a_pb2.Task:
        caller, agent = await self._addressed(context)
        stream, task, events = await self._start(caller, agent, params)
        if params.configuration.return_immediately:
            return task  # the run goes on (LiveRuns); GetTask / SubscribeToTask follow it
        await _spend(stream, events)
        task.status.CopyFrom(stream.task.status)
        task.artifacts.extend(stream.task.artifacts)
        task.metadata.MergeFrom(stream.task.metadata)  # what it used, once it completed
        if stream.task.status.HasField("message"):
            task.history.append(stream.task.status.message)
        if params.configuration.HasField("history_length"):
            _trim(task, params.configuration.history_length)
        return task

    async def on_message_send_stream(
        self, params: a2a_pb2.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        caller, agent = await _a2a_errors(context, self._addressed(context))
        with contextlib.ExitStack() as held:
            await _a2a_errors(context, self._hold_stream(caller, held))
            stream, task, events = await _a2a_errors(context, self._start(caller, agent, params))
            yield task
            async with contextlib.aclosing(events):  # leaving early leaves the run going (LiveRuns)
                async for item in events:
                    for update in _updates(stream, item):
                        yield update

    async def _start(
        self, caller: Caller, agent: Agent, params: a2a_pb2.SendMessageRequest
    ) -> tuple[TaskEventStream, a2a_pb2.Task, AsyncIterator[run_pb2.RunEvent | DomainError]]:
        _check_required(params)
        _check_history_length(params.configuration, "configuration.history_length")
        text = message_text(params.message)
        push = params.configuration.task_push_notification_config
        given = params.configuration.HasField("task_push_notification_config")
        if given:
            await self._push.check(caller, agent, push)
        stream, task, events = await self._tasks.send(caller, agent, params.message, text)
        if given:
            await self._push.set_for_new_task(caller, agent, task, push)
        return stream, task, events

    # Tasks.

    async def on_get_task(
        self, params: a2a_pb2.GetTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        async def get() -> a2a_pb2.Task:
            caller, agent = await self._addressed(context)
            _check_history_length(params, "history_length")
            history = params.history_length if params.HasField("history_length") else None
            return (await self._tasks.get(caller, agent, params.id, history_length=history)).task

        return await _a2a_errors(context, get())

    async def on_list_tasks(
        self, params: a2a_pb2.ListTasksRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTasksResponse:
        async def listed() -> a2a_pb2.ListTasksResponse:
            caller, agent = await self._addressed(context)
            _check_list_request(params, context.state.get(REQUESTED_STATUS))
            page = await self._tasks.list(
                caller,
                agent,
                context_id=params.context_id,
                status=params.status,
                status_since=(
                    params.status_timestamp_after if params.HasField("status_timestamp_after") else None
                ),
                page_size=params.page_size if params.HasField("page_size") else DEFAULT_PAGE_SIZE,
                page_token=params.page_token,
                history_length=params.history_length if params.HasField("history_length") else None,
            )
            if not params.include_artifacts:
                for task in page.tasks:
                    del task.artifacts[:]
            return page

        return await _a2a_errors(context, listed())

    async def on_cancel_task(
        self, params: a2a_pb2.CancelTaskRequest, context: ServerCallContext
    ) -> a2a_pb2.Task | None:
        async def cancel() -> a2a_pb2.Task:
            caller, agent = await self._addressed(context)
            snapshot = await self._tasks.get(caller, agent, params.id)
            if snapshot.is_terminal:
                raise a2a_errors.TaskNotCancelableError(f"task {params.id!r} has already ended")
            return (await self._tasks.cancel(caller, agent, snapshot)).task

        return await _a2a_errors(context, cancel())

    async def on_subscribe_to_task(
        self, params: a2a_pb2.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        caller, agent = await _a2a_errors(context, self._addressed(context))
        with contextlib.ExitStack() as held:
            await _a2a_errors(context, self._hold_stream(caller, held))
            snapshot = await _a2a_errors(context, self._tasks.get(caller, agent, params.id))
            if snapshot.is_terminal:
                raise a2a_errors.UnsupportedOperationError(f"task {params.id!r} has already ended")
            yield snapshot.task
            rest = self._tasks.subscribe(caller, agent, snapshot)
            async with contextlib.aclosing(rest):
                async for update in rest:
                    yield update

    async def _hold_stream(self, caller: Caller, held: contextlib.ExitStack) -> None:
        """Takes a stream slot of the caller and its project until `held` closes (QUOTA_EXCEEDED
        when one of them is full)."""
        held.enter_context(self._streams.holding(caller.user_id))

    async def on_get_extended_agent_card(
        self, params: a2a_pb2.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> a2a_pb2.AgentCard:
        async def card() -> a2a_pb2.AgentCard:
            _, agent = await self._addressed(context)
            base_url = context.state.get(BASE_URL) or self._endpoints.http_base_url
            return agent_card(
                agent.spec, base_url=base_url, grpc_address=self._endpoints.grpc_address, extended=True
            )

        return await _a2a_errors(context, card())

    # Push notifications: a task's configs, for who may read the task (push.py).

    async def on_create_task_push_notification_config(
        self, params: a2a_pb2.TaskPushNotificationConfig, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        async def created() -> a2a_pb2.TaskPushNotificationConfig:
            caller, agent = await self._addressed(context)
            return await self._push.set(caller, agent, params)

        return await _a2a_errors(context, created())

    async def on_get_task_push_notification_config(
        self, params: a2a_pb2.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> a2a_pb2.TaskPushNotificationConfig:
        async def got() -> a2a_pb2.TaskPushNotificationConfig:
            caller, agent = await self._addressed(context)
            return await self._push.get(caller, agent, params.task_id, params.id)

        return await _a2a_errors(context, got())

    async def on_list_task_push_notification_configs(
        self, params: a2a_pb2.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
        async def listed() -> a2a_pb2.ListTaskPushNotificationConfigsResponse:
            caller, agent = await self._addressed(context)
            configs = await self._push.list(caller, agent, params.task_id)
            return a2a_pb2.ListTaskPushNotificationConfigsResponse(configs=configs)

        return await _a2a_errors(context, listed())

    async def on_delete_task_push_notification_config(
        self, params: a2a_pb2.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        async def deleted() -> None:
            caller, agent = await self._addressed(context)
            await self._push.delete(caller, agent, params.task_id, params.id)

        await _a2a_errors(context, deleted())

    # The call's caller and agent.

    async def _addressed(self, context: ServerCallContext) -> tuple[Caller, Agent]:
        agent = context.state.get(AGENT)
        caller = context.state.get(CALLER)
        if isinstance(agent, Agent) and isinstance(caller, Caller):
            return caller, agent
        # gRPC: the policy interceptor authorized the caller for the tenant's project.
        _check_version(context)
        caller = current_caller()
        agent = await self._tasks.agent(caller, AgentRef.parse(context.tenant, field="tenant"))
        context.state[CALLER], context.state[AGENT] = caller, agent
        return caller, agent


def _updates(stream: TaskEventStream, item: run_pb2.RunEvent | DomainError) -> list[Any]:
    if isinstance(item, DomainError):
        return [] if stream.done else [stream.fail(item.message)]
    return list(stream.feed(item))


async def _spend(stream: TaskEventStream, events: AsyncIterator[run_pb2.RunEvent | DomainError]) -> None:
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        async for item in events:
            _updates(stream, item)


def _invalid(field: str, problem: str) -> a2a_errors.InvalidParamsError:
    """The spec's InvalidParamsError naming the field: in its message, and as a field violation
    (a BadRequest on gRPC and HTTP+JSON, `data.errors` on JSON-RPC)."""
    return a2a_errors.InvalidParamsError(
        f"{field}: {problem}", data={"errors": [{"field": field, "message": problem}]}
    )


def _check_required(params: a2a_pb2.SendMessageRequest) -> None:
    """The fields the spec requires (a message's `message_id`, `role` and `parts`, …): the
    proto marks them REQUIRED, which the SDK's validator reads."""
    try:
        validate_proto_required_fields(params)
    except a2a_errors.InvalidParamsError as error:
        violations = (error.data or {}).get("errors", [])
        problems = [(v["field"], v["message"].removeprefix("Field ").rstrip(".")) for v in violations]
        named = "; ".join(f"{field}: {problem}" for field, problem in problems)
        raise a2a_errors.InvalidParamsError(named or error.message, data=error.data) from None


def _check_history_length(params: Any, field: str) -> None:
    if params.HasField("history_length") and params.history_length < 0:
        raise _invalid(field, f"must not be negative, got {params.history_length}")


def _check_list_request(params: a2a_pb2.ListTasksRequest, requested_status: object) -> None:
    if params.HasField("page_size") and not 1 <= params.page_size <= MAX_PAGE_SIZE:
        raise _invalid("page_size", f"must be between 1 and {MAX_PAGE_SIZE}, got {params.page_size}")
    _check_history_length(params, "history_length")
    known = a2a_pb2.TaskState.keys()
    named = isinstance(requested_status, str) and not requested_status.lstrip("-").isdigit()
    if named and requested_status not in known:
        raise _invalid("status", f"{requested_status!r} is not a task state; one of {', '.join(known[1:])}")
    if params.status not in a2a_pb2.TaskState.values():
        raise _invalid("status", f"{params.status} is not a task state; one of {', '.join(known[1:])}")


def _trim(task: a2a_pb2.Task, history_length: int) -> None:
    kept = list(task.history)[-history_length:] if history_length > 0 else []
    del task.history[:]
    task.history.extend(kept)


def _check_version(context: ServerCallContext) -> None:
    """gRPC calls: an `a2a-version` metadata entry must name a 1.x protocol (the HTTP
    dispatchers check their `A2A-Version` header themselves)."""
    grpc_context = context.state.get("grpc_context")
    metadata = grpc_context.invocation_metadata() if grpc_context is not None else None
    for key, value in metadata or ():
        if key.lower() != VERSION_HEADER.lower():
            continue
        text = value if isinstance(value, str) else value.decode()
        try:
            major = Version(text).major
        except InvalidVersion:
            major = -1
        if major != 1:
            raise a2a_errors.VersionNotSupportedError(
                f"A2A version {text!r} is not supported; this server speaks 1.0"
            )


async def _a2a_errors(context: ServerCallContext, work: Any) -> Any:
    """Awaits `work`, turning the gateway's errors into A2A errors where the binding needs them
    (see the module docstring)."""
    try:
        return await work
    except TaskNotFound as error:
        raise a2a_errors.TaskNotFoundError(error.message) from None
    except InvalidArgument as error:
        raise a2a_errors.InvalidParamsError(error.message) from None
    except DomainError as error:
        if "grpc_context" in context.state:
            raise  # the server's error interceptor gives it its own status code
        if isinstance(error, FailedPrecondition):  # e.g. a paused or terminated agent
            raise a2a_errors.InvalidRequestError(error.message) from None
        if isinstance(error, ResourceExhausted):
            # A2A has no error of its own for "retry later": the reason and when to retry go in
            # its data, which a2a-sdk sends as an ErrorInfo's metadata (`retry_after_seconds`,
            # and for a project limit `quota_limit`).
            raise a2a_errors.InternalError(
                error.message, data={"reason": error.reason, **error.metadata}
            ) from None
        raise a2a_errors.InternalError(error.message) from None
