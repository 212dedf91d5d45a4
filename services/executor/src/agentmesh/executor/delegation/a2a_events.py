"""A remote A2A task's stream as a delegated worker's steps (outbound streaming).

A local worker's events reach the delegating run's stream as they happen (`ExecutorRuns`); a remote
A2A agent's should too, so a client following the parent sees the remote work the same way. Each
A2A response becomes the RunEvents a local worker would have streamed, named by the remote agent
with the delegation path below the delegating agent:

- the start of the delegation: `run_started` (`agent_kind` "a2a");
- a `working` status update with words: `step_started` then those words as a `text_delta`;
- an artifact chunk or a direct message: its text as a `text_delta` (the remote's answer as it
  streams);
- the end: `run_completed` with the answer, or `run_failed` with the state's code.

The same responses add up to how the task ended (`RemoteTaskStream.outcome`): completed with the
answer, or stopped — `input-required` / `auth-required` stop with the remote's question (outcomes
INPUT_REQUIRED / AUTH_REQUIRED: a task that asks for input is answered through the delegating run,
a2a.py), the failed states map to gRPC code names as a local child's failures do.
"""

from __future__ import annotations

import json

from a2a.types import a2a_pb2
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.events import EventOrigin, usage_from_struct
from agentmesh.executor.delegation.outcome import ChildOutcome
from agentmesh.executor.providers.base import Usage

State = a2a_pb2.TaskState
# A task that stops waiting for its caller: the delegation ends and says so (ChildOutcome codes).
INTERRUPTED = {
    State.TASK_STATE_INPUT_REQUIRED: "INPUT_REQUIRED",
    State.TASK_STATE_AUTH_REQUIRED: "AUTH_REQUIRED",
}
_FAILED = {
    State.TASK_STATE_FAILED: "INTERNAL",
    State.TASK_STATE_CANCELED: "CANCELLED",
    State.TASK_STATE_REJECTED: "FAILED_PRECONDITION",
}
_WORKING = {State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING, State.TASK_STATE_UNSPECIFIED}


class RemoteTaskStream:
    """Maps one remote task's A2A responses to RunEvents from `origin` and keeps what they add up
    to: the task's id, its latest state, its answer text and its latest status words."""

    def __init__(self, origin: EventOrigin) -> None:
        self.origin = origin
        self.task_id = ""
        self.context_id = ""  # the remote's A2A context of the task
        self.state: a2a_pb2.TaskState.ValueType = State.TASK_STATE_SUBMITTED
        self.artifacts: dict[str, str] = {}
        self.message = ""
        self._steps = 0
        self.usage: Usage | None = None  # what the remote says its task used, if it does

    def started(self) -> run_pb2.RunEvent:
        return self.origin.event(run_started=run_pb2.RunStarted(agent_kind="a2a"))

    def feed(self, response: a2a_pb2.StreamResponse) -> list[run_pb2.RunEvent]:
        """The RunEvents one response streams."""
        if response.HasField("message"):  # an answer without a task
            self.state = State.TASK_STATE_COMPLETED
            self.message = parts_text(response.message.parts)
            return self._text(self.message)
        if response.HasField("task"):
            task = response.task
            self.task_id = task.id or self.task_id
            self.context_id = task.context_id or self.context_id
            self.state = task.status.state
            for artifact in task.artifacts:
                self.artifacts[artifact.artifact_id] = parts_text(artifact.parts)
            self.message = parts_text(task.status.message.parts) or self.message
            self.usage = reported_usage(task.metadata) or self.usage
            return []
        if response.HasField("artifact_update"):
            update = response.artifact_update
            self.task_id = update.task_id or self.task_id
            chunk = parts_text(update.artifact.parts)
            before = self.artifacts.get(update.artifact.artifact_id, "") if update.append else ""
            self.artifacts[update.artifact.artifact_id] = before + chunk
            return self._text(chunk)
        if response.HasField("status_update"):
            update = response.status_update
            self.task_id = update.task_id or self.task_id
            self.context_id = update.context_id or self.context_id
            self.state = update.status.state
            self.usage = reported_usage(update.metadata) or self.usage
            words = parts_text(update.status.message.parts)
            self.message = words or self.message
            if words and self.state in _WORKING:
                self._steps += 1
                return [
                    self.origin.event(step_started=run_pb2.StepStarted(step=self._steps)),
                    *self._text(words),
                ]
        return []

    @property
    def working(self) -> bool:
        """The task has not ended, nor stopped to ask its caller."""
        return self.state in _WORKING

    @property
    def answer(self) -> str:
        return "\n".join(text for text in self.artifacts.values() if text) or self.message

    def outcome(self) -> ChildOutcome:
        """How the task ended, as the delegation records it."""
        if self.state == State.TASK_STATE_COMPLETED:
            # A remote that does not say what it used has an unknown cost, not none.
            usage = self.usage or Usage(unpriced=frozenset({f"a2a:{self.origin.agent}"}))
            return ChildOutcome(completed=True, content=self.answer, usage=usage)
        if self.state in INTERRUPTED:
            # The remote's question is what the delegating model must act on.
            question = self.message or self.answer
            return ChildOutcome(code=INTERRUPTED[self.state], message=question or State.Name(self.state))
        if self.state in _WORKING:
            return ChildOutcome(code="INTERNAL", message="the remote task's stream ended before the task did")
        return ChildOutcome(
            code=_FAILED.get(self.state, "INTERNAL"), message=self.message or State.Name(self.state)
        )

    def finished(self, outcome: ChildOutcome) -> run_pb2.RunEvent:
        """The worker's last event: its answer, or why it stopped."""
        if outcome.completed:
            return self.origin.event(run_completed=run_pb2.RunCompleted(content=outcome.content))
        code = "FAILED_PRECONDITION" if outcome.code in INTERRUPTED.values() else outcome.code
        return self.origin.event(run_failed=run_pb2.RunFailed(code=code, message=outcome.message))

    def _text(self, text: str) -> list[run_pb2.RunEvent]:
        return [self.origin.event(text_delta=run_pb2.TextDelta(text=text))] if text else []


def parts_text(parts: object) -> str:
    """The text a model can read from A2A parts: text parts as they are, data parts as JSON (files
    are left out: a delegating model has no way to open them)."""
    texts = []
    for part in parts:  # type: ignore[attr-defined]
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False, sort_keys=True))
    return "".join(texts)


def reported_usage(metadata: struct_pb2.Struct) -> Usage | None:
    """The usage an agentmesh remote reports in a task's metadata (`agentmesh.usage`: tokens,
    and the cost, null when unknown); None when it reports none."""
    if "agentmesh" not in metadata.fields:
        return None
    mesh = metadata.fields["agentmesh"].struct_value.fields
    return usage_from_struct(mesh["usage"].struct_value) if "usage" in mesh else None
