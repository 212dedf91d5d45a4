"""A2A push notification configs, transport-free (handler.py adapts every binding to it).

A task's configs are scoped like the task: each operation first reads the task as the caller
(`A2ATasks.get`: TaskNotFound unless they may read it), then asks the registry, with the caller's
token, to store or read them. The registry keeps each config as a webhook bound to the task's run
and delivers the task's status updates from the webhooks' outbox (docs/webhooks.md), so they
survive restarts and are retried; this module never POSTs anything itself.

Answers carry the config with its token (the spec's object) but never its credentials; nothing
here logs either.
"""

from __future__ import annotations

from a2a.types import a2a_pb2
from a2a.utils import errors as a2a_errors
from google.protobuf.json_format import MessageToDict

from agentmesh.gateway.a2a.convert import TaskId
from agentmesh.gateway.a2a.tasks import A2ATasks, Agent
from agentmesh.gateway.errors import TaskNotFound
from agentmesh.gateway.models import Caller
from agentmesh.internal.registry.v1 import registry_internal_service_pb2 as internal_pb
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.errors import InvalidArgument, NotFound

TaskState = a2a_pb2.TaskState
# The run events a task that already reached a state went through (what a config set once the
# run started is told, once: the registry gives them the ids the run's own would have).
_ENDS = {TaskState.TASK_STATE_COMPLETED: "run.completed"}
NEW_TASK_FIELD = "configuration.task_push_notification_config"
_FAILED = (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED)


class TaskPushConfigs:
    """Set, get, list and delete a task's push notification configs, for who may read the task."""

    def __init__(self, tasks: A2ATasks, registry: RegistryClient) -> None:
        self._tasks = tasks
        self._registry = registry

    async def set(
        self, caller: Caller, agent: Agent, config: a2a_pb2.TaskPushNotificationConfig, *, field: str = ""
    ) -> a2a_pb2.TaskPushNotificationConfig:
        """Stores the config of the task it names (replacing the task's config of that id)."""
        snapshot = await self._tasks.get(caller, agent, config.task_id)
        return await self._store(caller, agent, snapshot.task, config, field=field)

    async def check(self, caller: Caller, agent: Agent, config: a2a_pb2.TaskPushNotificationConfig) -> None:
        """Refuses (InvalidParamsError naming the field) the config a message gives, before the
        message starts its run: nothing is stored then, and no run started."""
        await self._store(caller, agent, None, config, field=NEW_TASK_FIELD, validate_only=True)

    async def set_for_new_task(
        self, caller: Caller, agent: Agent, task: a2a_pb2.Task, config: a2a_pb2.TaskPushNotificationConfig
    ) -> None:
        """The config a message gave (`configuration.task_push_notification_config`) for the task
        it started: stored once the run exists, and told the run's start at once. A run quicker
        than that may have ended (or be told nothing else) already: the task is read again after
        the config is stored — its end is recorded in the log before the registry's, so either
        the run's end enqueues this config's notification or this read sees it — and an end is
        told once more, with the same id (a receiver gets it once)."""
        config.task_id = task.id
        field = NEW_TASK_FIELD
        stored = await self._store(caller, agent, task, config, field=field, catch_up=["run.started"])
        status = (await self._tasks.get(caller, agent, task.id, history_length=0)).task.status
        end = _ENDS.get(status.state) or ("run.failed" if status.state in _FAILED else "")
        asked = _waiting_on(status) if status.state == TaskState.TASK_STATE_INPUT_REQUIRED else ""
        if end or asked:
            config.id = stored.id
            await self._store(
                caller,
                agent,
                task,
                config,
                field=field,
                catch_up=[end] if end else [],
                input_request_id=asked,
                cancelled=status.state == TaskState.TASK_STATE_CANCELED,
            )

    async def get(
        self, caller: Caller, agent: Agent, task_id: str, config_id: str
    ) -> a2a_pb2.TaskPushNotificationConfig:
        task = (await self._tasks.get(caller, agent, task_id, history_length=0)).task
        try:
            found = await self._registry.get_task_push_config(
                agent.project_id, _run_of(task), config_id, metadata=caller.metadata
            )
        except NotFound:
            raise TaskNotFound(task_id) from None
        return _a2a_config(found, task.id)

    async def list(
        self, caller: Caller, agent: Agent, task_id: str
    ) -> list[a2a_pb2.TaskPushNotificationConfig]:
        task = (await self._tasks.get(caller, agent, task_id, history_length=0)).task
        found = await self._registry.list_task_push_configs(
            agent.project_id, _run_of(task), metadata=caller.metadata
        )
        return [_a2a_config(config, task.id) for config in found]

    async def delete(self, caller: Caller, agent: Agent, task_id: str, config_id: str) -> None:
        task = (await self._tasks.get(caller, agent, task_id, history_length=0)).task
        try:
            await self._registry.delete_task_push_config(
                agent.project_id, _run_of(task), config_id, metadata=caller.metadata
            )
        except NotFound:
            raise TaskNotFound(task_id) from None

    async def _store(
        self,
        caller: Caller,
        agent: Agent,
        task: a2a_pb2.Task | None,
        config: a2a_pb2.TaskPushNotificationConfig,
        *,
        field: str,
        catch_up: list[str] | None = None,
        input_request_id: str = "",
        cancelled: bool = False,
        validate_only: bool = False,
    ) -> a2a_pb2.TaskPushNotificationConfig:
        task = task or a2a_pb2.Task()  # checked before the task exists
        given = internal_pb.TaskPushConfig(
            id=config.id,
            project_id=agent.project_id,
            agent_id=agent.spec.agent.id,
            run_id=_run_of(task) if task.id else "",
            task_id=task.id,
            url=config.url,
            token=config.token,
            auth_scheme=config.authentication.scheme,
            auth_credentials=config.authentication.credentials,
        )
        try:
            stored = await self._registry.set_task_push_config(
                given,
                session_id=task.context_id,
                catch_up_events=catch_up or (),
                catch_up_input_request_id=input_request_id,
                catch_up_cancelled=cancelled,
                validate_only=validate_only,
                metadata=caller.metadata,
            )
        except InvalidArgument as error:
            raise _invalid(error, field) from None
        return _a2a_config(stored, task.id)


def _waiting_on(status: a2a_pb2.TaskStatus) -> str:
    """The id of the request an input-required task's status message carries (convert.py's
    `input_required_message`), "" when it carries none."""
    for part in status.message.parts:
        if part.HasField("data"):
            request = MessageToDict(part.data).get("input_request")
            if isinstance(request, dict):
                return str(request.get("id", ""))
    return ""


def _run_of(task: a2a_pb2.Task) -> str:
    parsed = TaskId.parse(task.id)
    assert parsed is not None  # a task read from the log has a well-formed id
    return parsed.run_id


def _a2a_config(config: internal_pb.TaskPushConfig, task_id: str) -> a2a_pb2.TaskPushNotificationConfig:
    """The A2A config: its token, the scheme of its authentication, never its credentials."""
    answer = a2a_pb2.TaskPushNotificationConfig(
        id=config.id, task_id=task_id, url=config.url, token=config.token
    )
    if config.auth_scheme:
        answer.authentication.scheme = config.auth_scheme
    return answer


def _invalid(error: InvalidArgument, prefix: str) -> a2a_errors.InvalidParamsError:
    """The registry's refusal as the spec's InvalidParamsError, each field named as the client
    wrote it (under `prefix` when the config came inside another request)."""
    violations = [
        {"field": f"{prefix}.{v.field}" if prefix else v.field, "message": v.description}
        for v in error.violations
    ] or [{"field": prefix or "url", "message": error.message}]
    named = "; ".join(f"{v['field']}: {v['message']}" for v in violations)
    return a2a_errors.InvalidParamsError(named, data={"errors": violations})
