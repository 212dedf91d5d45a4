"""Runs agents: resolves the agent, marks it working, runs its loop, records every step in memory
and streams every step to the caller."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.events import RunContext, usage_proto
from agentmesh.executor.models.base import ChatModel, Message, Usage
from agentmesh.executor.recorder import EventType, Recorder
from agentmesh.executor.settings import ExecutorSettings
from agentmesh.executor.v1 import executor_service_pb2
from agentmesh.memory.client import MemoryClient
from agentmesh.memory.v1 import memory_service_pb2
from agentmesh.registry.client import RegistryClient
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime import telemetry
from agentmesh.runtime.errors import FieldViolation, InvalidArgument, NotFound, ResourceExhausted

logger = logging.getLogger(__name__)

ModelFactory = Callable[[resources_pb2.AgentSpec], ChatModel]

_HISTORY_ROLES = {
    EventType.EVENT_TYPE_USER_MESSAGE: "user",
    EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED: "user",
    EventType.EVENT_TYPE_AGENT_RESPONSE: "assistant",
}


@dataclass
class RunOutcome:
    content: str = ""
    usage: Usage = field(default_factory=Usage)
    completed: bool = False


class RunExecutor:
    """Runs one input through one agent until it answers, as a stream of RunEvents."""

    def __init__(
        self,
        *,
        settings: ExecutorSettings,
        registry: RegistryClient,
        memory: MemoryClient,
        model_factory: ModelFactory,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._memory = memory
        self._model_factory = model_factory
        self._slots = asyncio.Semaphore(settings.max_concurrent_runs)
        self.active_runs = 0

    async def run(self, request: executor_service_pb2.RunRequest) -> AsyncIterator[run_pb2.RunEvent]:
        _validate(request)
        if self._slots.locked():
            raise ResourceExhausted(
                f"executor is running {self._settings.max_concurrent_runs} runs; try another",
                reason="EXECUTOR_BUSY",
            )
        async with self._slots:
            self.active_runs += 1
            try:
                async for event in self._run(request):
                    yield event
            finally:
                self.active_runs -= 1

    async def _run(self, request: executor_service_pb2.RunRequest) -> AsyncIterator[run_pb2.RunEvent]:
        spec = await self._registry.resolve_agent(request.project_slug, request.agent_name)
        run_id = uuid.uuid4().hex
        context = RunContext(run_id, request.session_id, spec.agent.name, tuple(request.delegation_path))
        with telemetry.tracer().start_as_current_span(
            f"run {spec.agent.name}",
            attributes={
                telemetry.AGENT_NAME: spec.agent.name,
                telemetry.PROJECT: spec.project_slug,
                telemetry.SESSION_ID: request.session_id,
                telemetry.RUN_ID: run_id,
                telemetry.DELEGATION_DEPTH: request.delegation_depth,
            },
        ):
            await self._registry.start_agent_run(spec.agent.id, run_id)
            outcome = RunOutcome()
            try:
                recorder = Recorder(
                    self._memory,
                    session_id=request.session_id,
                    project_id=spec.agent.project_id,
                    agent=spec.agent.name,
                    run_id=run_id,
                    delegation_id=request.delegation_id,
                )
                async for event in self._run_llm(spec, request, context, recorder, outcome):
                    yield event
            finally:
                # The run's bookkeeping must happen even when the caller cancelled it.
                await asyncio.shield(self._finish(spec.agent.id, run_id, outcome))

    async def _finish(self, agent_id: str, run_id: str, outcome: RunOutcome) -> None:
        try:
            await self._registry.finish_agent_run(
                agent_id,
                run_id,
                completed=outcome.completed,
                tokens_used=outcome.usage.total_tokens,
                cost=outcome.usage.cost,
            )
        except Exception:
            logger.exception("could not record the end of run %s", run_id)

    async def _history(self, session_id: str, agent: str) -> list[Message]:
        """The agent's own recent events in the session: a bounded window, newest last."""
        request = memory_service_pb2.ListEventsRequest(
            session_id=session_id,
            agent=agent,
            event_types=list(_HISTORY_ROLES),
            page_size=self._settings.history_window_events,
            descending=True,
        )
        try:
            response = await self._memory.list_events(request)
        except NotFound:  # a new session has no history yet
            return []
        return [
            Message(role=_HISTORY_ROLES[e.event_type], content=e.content) for e in reversed(response.events)
        ]

    async def _run_llm(
        self,
        spec: resources_pb2.AgentSpec,
        request: executor_service_pb2.RunRequest,
        context: RunContext,
        recorder: Recorder,
        outcome: RunOutcome,
    ) -> AsyncIterator[run_pb2.RunEvent]:
        model = self._model_factory(spec)
        yield context.event(run_started=run_pb2.RunStarted(agent_kind="llm", model=model.name))
        history = await self._history(request.session_id, spec.agent.name)
        first_type = (
            EventType.EVENT_TYPE_TASK_DELEGATION_RECEIVED
            if request.delegation_id
            else EventType.EVENT_TYPE_USER_MESSAGE
        )
        received = await recorder.record(first_type, request.input, parent_event_id=request.parent_event_id)
        messages = [Message("system", spec.instructions), *history, Message("user", request.input)]
        max_steps = spec.max_steps or 10
        text = ""
        step = 0
        for step in range(1, max_steps + 1):
            yield context.event(step_started=run_pb2.StepStarted(step=step))
            text = ""
            with telemetry.tracer().start_as_current_span(
                f"chat {model.name}",
                attributes={
                    telemetry.GEN_AI_SYSTEM: model.system,
                    telemetry.GEN_AI_OPERATION: "chat",
                    telemetry.GEN_AI_REQUEST_MODEL: model.name,
                    telemetry.STEP: step,
                },
            ) as span:
                async for chunk in model.stream(messages, ()):
                    if chunk.text:
                        text += chunk.text
                        yield context.event(text_delta=run_pb2.TextDelta(text=chunk.text))
                    if chunk.usage:
                        outcome.usage += chunk.usage
                        span.set_attribute(telemetry.GEN_AI_USAGE_INPUT_TOKENS, chunk.usage.input_tokens)
                        span.set_attribute(telemetry.GEN_AI_USAGE_OUTPUT_TOKENS, chunk.usage.output_tokens)
            break
        response = await recorder.record(
            EventType.EVENT_TYPE_AGENT_RESPONSE, text, parent_event_id=received.id
        )
        outcome.content, outcome.completed = text, True
        yield context.event(
            seq=response.seq,
            run_completed=run_pb2.RunCompleted(content=text, usage=usage_proto(outcome.usage), steps=step),
        )


def _validate(request: executor_service_pb2.RunRequest) -> None:
    violations = [
        FieldViolation(name, "is required")
        for name, value in (
            ("project_slug", request.project_slug),
            ("agent_name", request.agent_name),
            ("session_id", request.session_id),
        )
        if not value
    ]
    if violations:
        raise InvalidArgument(
            "; ".join(f"{v.field} {v.description}" for v in violations), violations=violations
        )
