"""The LLM agent's loop (DESIGN §5): context → model (streaming) → tool calls and delegations →
again, until a final answer or `max_steps`.

Context: the instructions (with the agents it may delegate to, and how to call tools and delegate
in fenced blocks when the model has no function calling), the agent's own recent events in the
session (a bounded window read newest-first, never the whole session) and the input. Tool calls
and delegations of one step run concurrently, each bounded in time; every error is fed back to the
model. Text streams in chunks, with ```delegate / ```tool_call blocks taken out of the answer. A call
that needs a person — an approval, or an answer to `ask_user` — is not run: the run records the
request and suspends (loops/asking.py), and goes on from the log once it is answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.agents.runtime import AgentRuntime, delegate_tool_spec
from agentmesh.executor.context.budget import check_budget
from agentmesh.executor.context.scope import RunResult, RunScope
from agentmesh.executor.delegation.delegator import Delegator, PreparedDelegation
from agentmesh.executor.delegation.outcome import DelegationResult, SuspendedBelow
from agentmesh.executor.durability.detached import run_detached
from agentmesh.executor.durability.recorder import EventType, NewEvent
from agentmesh.executor.durability.run_log import (
    DELEGATION,
    INVALID,
    TOOL,
    LoggedCall,
    LoggedStep,
    PlannedCall,
    RunLog,
)
from agentmesh.executor.errors import INVALID_BLOCK
from agentmesh.executor.loops import asking, client_tools, in_doubt, remote_questions
from agentmesh.executor.loops.messages import assistant_turn, result_messages
from agentmesh.executor.loops.model_step import call_model
from agentmesh.executor.loops.planning import plan
from agentmesh.executor.providers.base import Message, ToolSpec
from agentmesh.executor.tools.base import ToolAnswer, ToolOutput
from agentmesh.executor.tools.builtin import EXIT_LOOP
from agentmesh.memory.v1.resources_pb2 import Event
from agentmesh.runtime import metrics, telemetry
from agentmesh.runtime.batching import item_of
from agentmesh.runtime.errors import Unavailable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LlmLoopSettings:
    """What the LLM loop is configured with (from the executor's settings, in `app.py`)."""

    default_max_steps: int
    text_chunk_chars: int
    text_flush_seconds: float
    tool_timeout_seconds: float
    cleanup_timeout_seconds: float
    tool_result_prompt_chars: int = 0  # longer tool results are cut in the prompt; 0: never


class LlmLoop:
    """Runs one input through an LLM agent."""

    def __init__(
        self,
        scope: RunScope,
        runtime: AgentRuntime,
        *,
        settings: LlmLoopSettings,
        delegator: Delegator,
    ) -> None:
        self._scope = scope
        self._runtime = runtime
        self._settings = settings
        self._delegator = delegator
        self._as_sub_agent = scope.request.as_sub_agent
        self._tools = runtime.tool_set(as_sub_agent=self._as_sub_agent)
        self._targets = runtime.delegation_targets()
        self._result = RunResult()
        # The step's delegated runs that suspended to wait for a person: the run waits on them.
        self._below: list[SuspendedBelow] = []
        # Delegations whose remote A2A task asks a question, with their request event's id.
        self._remote_asks: list[tuple[PlannedCall, str]] = []
        # Tool calls whose tool asks a person (an MCP server's elicitation), with their intent's id.
        self._tool_asks: list[tuple[PlannedCall, str]] = []
        # A suspended run's requests with their responses, as it was handed over (run_log.py).
        self._resumed_responses: dict[str, run_pb2.InputRequest] = {}

    async def run(self, history: Sequence[Message], resumed: RunLog | None = None) -> RunResult:
        """The loop from its first step, or — for a run `resumed` from the log on another
        executor — from where its log stops: its logged steps are not asked again, and the calls
        of its last step that have no recorded result are finished first (`_finish_step`)."""
        scope, result = self._scope, self._result
        choice = client_tools.ToolChoice(scope.request, self._runtime, resumed.answered if resumed else 0)
        model = choice.model
        messages: list[Message] = [
            Message("system", self._runtime.system_prompt(as_sub_agent=scope.request.as_sub_agent)),
            *history,
            Message("user", scope.request.input),
        ]
        tool_specs = self._offered_tools()
        max_steps = scope.spec.max_steps or self._settings.default_max_steps
        best = ""
        first = 1
        if resumed is not None:
            self._resumed_responses = dict(resumed.responses)
            for logged in resumed.steps:
                calls = [call.call for call in logged.calls]
                choice.saw(calls)
                for call in calls:  # what the dead executor's model steps used, counted here once
                    if call.usage is not None:
                        result.usage += call.usage
                        result.total_usage += call.usage
                        scope.meter.add(model.name, call.usage)
                messages.append(assistant_turn(calls))
                outputs = await self._finish_step(logged)
                messages.extend(
                    result_messages(calls, outputs, max_chars=self._settings.tool_result_prompt_chars)
                )
                exits = [
                    o for c, o in zip(calls, outputs, strict=True) if c.name == EXIT_LOOP and not o.is_error
                ]
                if exits:
                    result.steps, result.escalated, result.content = logged.number, True, exits[0].text
                    return result
            first = resumed.answered + 1
            result.steps = resumed.answered
        for step in range(first, max_steps + 1):
            check_budget(scope)  # spent: no step more
            result.steps = step
            metrics.record_step(kind="llm")
            await scope.sink.emit(scope.origin.event(step_started=run_pb2.StepStarted(step=step)))
            with telemetry.step_span(step=step, agent=scope.agent):
                step_model = choice.for_step(tool_specs)
                reply = await call_model(
                    scope, step_model, messages, tool_specs, step, chunking=self._settings
                )
                result.usage += reply.usage
                result.total_usage += reply.usage
                best = reply.visible or best
                # The summing-up step after an escalation answers; it calls nothing more.
                calls = (
                    []
                    if result.escalated
                    else plan(reply, step, self._runtime, self._scope, tools=self._tools)
                )
                choice.saw(calls)
                if not calls:
                    if reply.visible or not result.escalated:
                        result.content = reply.visible
                    return result
                logged = [call for call in calls if call.kind != INVALID]  # those with an intent event
                if logged:
                    logged[0].usage = reply.usage
                messages.append(Message("assistant", reply.raw, tool_calls=reply.native_calls))
                outputs = await self._run_calls(calls)
            messages.extend(
                result_messages(calls, outputs, max_chars=self._settings.tool_result_prompt_chars)
            )
            escalations = [output for output in outputs if output.escalate]
            if escalations:
                result.escalated = True
                result.content = reply.visible or escalations[0].text
                if not any(output.summarize for output in escalations) or step == max_steps:
                    return result
                tool_specs = []  # one more model step, to sum up: nothing more to call
        result.max_steps_reached = True
        note = f"(Stopped at the limit of {max_steps} steps; this is the best answer so far.)"
        result.content = f"{best}\n\n{note}" if best else note
        await scope.sink.emit(
            scope.origin.event(text_delta=run_pb2.TextDelta(text=f"\n\n{note}" if best else note))
        )
        return result

    # -- context ----------------------------------------------------------------------------------

    def _offered_tools(self) -> list[ToolSpec]:
        """The agent's tools, its delegations and the client's tools (client_tools.py)."""
        client_tools.check(self._scope.request, self._tools)
        if not self._runtime.function_calling:
            return []  # described in the system prompt instead, called in fenced blocks
        specs = self._runtime.offered_tools(as_sub_agent=self._as_sub_agent)
        if self._targets:
            specs.append(delegate_tool_spec(self._targets))
        return specs + client_tools.specs(self._scope.request)

    # -- tools and delegations --------------------------------------------------------------------

    async def _run_calls(self, calls: Sequence[PlannedCall]) -> list[ToolOutput]:
        """Runs a step's calls concurrently; outputs in the order of `calls`.

        The step's intent events — its `tool_call`s and the `delegation_request`s it may send —
        are one append (docs/durability.md): a death after it leaves the whole step in
        the log, for the run's taker to finish. With delegations in it, the append is detached
        from the run's cancellation, as a delegation's own request is: once it is stored, every
        delegation in it gets its one response. The delegations wait for it in their tasks."""
        scope = self._scope
        tool_calls = [call for call in calls if call.kind == TOOL]
        wanted = [call for call in calls if call.kind == DELEGATION]
        planned = await self._delegator.prepare_step(
            scope, [(call.name, call.task, call.intent()) for call in wanted]
        )
        delegations = {call.id: prepared for call, prepared in zip(wanted, planned, strict=True)}
        requests = [prepared for prepared in delegations.values() if prepared.request is not None]
        intents = [
            NewEvent(
                EventType.EVENT_TYPE_TOOL_CALL,
                {"name": call.name, "arguments": call.arguments},
                metadata={**call.intent(), "tool": call.name},
                parent_event_id=scope.input_event_id,
            )
            for call in tool_calls
        ] + [prepared.request for prepared in requests if prepared.request is not None]
        if requests:
            step: asyncio.Future[list[Event]] = asyncio.ensure_future(
                run_detached(
                    lambda: scope.recorder.record_many(intents),
                    timeout_seconds=self._settings.cleanup_timeout_seconds,
                )
            )
            for place, prepared in enumerate(requests, start=len(tool_calls)):
                prepared.recording = item_of(step, place)
        outputs: dict[str, ToolOutput] = {}
        failure: Exception | None = None
        recorded = [] if requests else await scope.recorder.record_many(intents)
        # Delegations that need a person's approval: recorded with the step, sent once approved.
        approvals = [
            c for c in calls if c.kind == DELEGATION and asking.asks(c) and delegations[c.id].request
        ]
        async with asyncio.TaskGroup() as group:
            for call in calls:
                if call.kind == DELEGATION and call not in approvals:
                    group.create_task(self._delegate(call, delegations[call.id], outputs))
            if requests:
                # Cancelled meanwhile, the delegations' tasks wait for the detached append and
                # answer what it stored (Delegator.delegate); the tools never start. Failed, it
                # is this step's failure, raised below (not in the group's ExceptionGroup).
                try:
                    recorded = await asyncio.shield(step)
                except TimeoutError:
                    failure = Unavailable(
                        "the step could not be recorded: the memory service did not answer within "
                        f"{self._settings.cleanup_timeout_seconds:g} s"
                    )
                except Exception as error:
                    failure = error
            if failure is None:
                for call, event in zip(tool_calls, recorded[: len(tool_calls)], strict=True):
                    tool_call = run_pb2.ToolCall(call_id=call.id, name=call.name)
                    tool_call.arguments.update(call.arguments)
                    await scope.sink.emit(scope.origin.event(seq=event.seq, tool_call=tool_call))
                for call, event in zip(tool_calls, recorded[: len(tool_calls)], strict=True):
                    if asking.asks(call) is None:
                        group.create_task(self._tool(call, event.id, outputs))
                for call in calls:
                    if call.kind == INVALID:
                        group.create_task(self._invalid(call, outputs))
        if failure is not None:
            raise failure
        held = [
            (call, event.id)
            for call, event in zip(tool_calls, recorded[: len(tool_calls)], strict=True)
            if asking.asks(call)
        ]
        for call in approvals:
            recording = delegations[call.id].recording
            assert recording is not None, "a delegation to approve is recorded with its step"
            held.append((call, (await recording).id))
        held.extend(self._remote_asks)
        if held or self._below:
            # The step's other calls ran (their results are recorded first, so that whoever
            # follows the log stops at the last request): the run suspends on these, and on its
            # delegated runs that wait for a person (their delegations left open).
            requests = await asking.ask(self._scope, held) if held else []
            raise asking.RunSuspends(requests, below=self._below)
        return [outputs[call.id] for call in calls]

    async def _tool(
        self,
        call: PlannedCall,
        call_event_id: str,
        outputs: dict[str, ToolOutput],
        *,
        answer: ToolOutput | None = None,
        carrying: ToolAnswer | None = None,
    ) -> None:
        """Runs a call and records its result — or records `answer` as its result instead (a
        person's answer, or why a call that asked for approval did not run). A call whose tool
        asks a person has no result yet: the run asks (`_tool_asks`), and the call goes on
        `carrying` the answer when the run resumes."""
        scope = self._scope
        with telemetry.tool_span(tool=call.name, call_id=call.id) as span:
            started = time.monotonic()
            # Only the agent's own tools name a label: a name the model made up does not.
            tool = call.name if call.name in self._tools else "unknown"
            if answer is not None:
                output = answer
            elif call.error:
                output = ToolOutput(f"{call.name}: {call.error}", is_error=True, outcome="refused")
            else:
                try:
                    output = await self._tools.call(
                        call.name,
                        call.arguments,
                        timeout_seconds=self._settings.tool_timeout_seconds,
                        answer=carrying,
                    )
                except asyncio.CancelledError:
                    metrics.record_tool_call(
                        tool=tool, outcome="cancelled", seconds=time.monotonic() - started
                    )
                    raise
            if output.question is not None:
                call.tool_question = output.question
                self._tool_asks.append((call, call_event_id))
                return
            metrics.record_tool_call(
                tool=tool, outcome=output.metric_outcome, seconds=time.monotonic() - started
            )
            span.set_attribute(telemetry.TOOL_OUTCOME, "error" if output.is_error else "ok")
            telemetry.set_content(span, telemetry.GEN_AI_TOOL_CALL_RESULT, output.text)
            reason = str(call.arguments.get("reason") or "")
            # The result and the escalation it makes are one append, shared with the step's other
            # results that finish while one is in flight: as few appends per step, each one costs.
            event, *escalation = await scope.recorder.record_coalesced(
                [
                    NewEvent(
                        EventType.EVENT_TYPE_TOOL_RESULT,
                        output.text,
                        metadata={"call_id": call.id, "tool": call.name, "is_error": output.is_error},
                        parent_event_id=call_event_id,
                    ),
                    *(
                        [
                            NewEvent(
                                EventType.EVENT_TYPE_ESCALATION,
                                reason or f"{scope.agent} ended the loop",
                                metadata={"tool": call.name},
                                parent_event_id=call_event_id,
                            )
                        ]
                        if output.escalate
                        else []
                    ),
                ]
            )
            await scope.sink.emit(
                scope.origin.event(
                    seq=event.seq,
                    tool_result=run_pb2.ToolResult(
                        call_id=call.id, name=call.name, output=output.text, is_error=output.is_error
                    ),
                )
            )
            for escalated in escalation:
                await scope.sink.emit(
                    scope.origin.event(seq=escalated.seq, escalation=run_pb2.Escalation(reason=reason))
                )
        outputs[call.id] = output

    async def _delegate(
        self, call: PlannedCall, prepared: PreparedDelegation, outputs: dict[str, ToolOutput]
    ) -> None:
        try:
            result = await self._delegator.delegate(self._scope, call.name, call.task, prepared=prepared)
        except Exception:
            recording = prepared.recording
            if recording is not None and not recording.cancelled() and recording.exception() is not None:
                return  # the step's append failed: `_run_calls` raises that, once
            raise
        recording = prepared.recording
        self._delegated(call, result, outputs, (await recording).id if recording and result.question else "")

    def _delegated(
        self, call: PlannedCall, result: DelegationResult, outputs: dict[str, ToolOutput], event_id: str = ""
    ) -> None:
        """A delegation's result is the call's output — unless its run below waits for a person
        (`_below`) or its remote task asks a question (`_remote_asks`): the call is left open."""
        self._result.total_usage += result.usage
        self._scope.meter.below += result.usage
        if result.suspended is not None:
            self._below.append(result.suspended)
            return
        if result.question:
            call.remote_question = result.question
            self._remote_asks.append((call, event_id))
            return
        outputs[call.id] = ToolOutput(result.text, is_error=result.is_error)

    # -- resuming a run from the log (resumption.py) ------------------------------------------------

    async def _finish_step(self, logged: LoggedStep) -> list[ToolOutput]:
        """The outputs of a logged step's calls: recorded ones as recorded; the others finished
        now — an in-doubt tool call run again only when its tool is idempotent (else the model is
        told its outcome is unknown), an open delegation answered from its delegated run."""
        outputs = {call.call.id: call.output for call in logged.calls if call.output is not None}
        waiting: list[run_pb2.InputRequest] = []
        unasked: list[tuple[PlannedCall, str]] = []
        async with asyncio.TaskGroup() as group:
            for open_call in (call for call in logged.calls if call.output is None):
                call = open_call.call
                if call.kind == TOOL:  # as permitted now (the log does not say; rules may have changed)
                    asking.permitted(call, self._runtime, self._scope)
                if call.kind == DELEGATION and open_call.asked is not None:
                    group.create_task(self._answered(open_call, outputs, waiting))
                elif call.kind == DELEGATION and await asking.unasked_approval(
                    open_call, self._runtime, self._delegator, self._scope
                ):
                    unasked.append((call, open_call.event.id))  # its run stopped before it asked
                elif call.kind == DELEGATION:
                    group.create_task(self._resume_delegation(open_call, outputs))
                elif call.error and open_call.received is None:
                    # Not permitted (any more): refused, nothing runs.
                    group.create_task(self._tool(call, open_call.event.id, outputs))
                elif open_call.asked is not None:
                    group.create_task(self._answered(open_call, outputs, waiting))
                elif asking.asks(call) is not None:
                    unasked.append((call, open_call.event.id))  # its run stopped before it asked
                elif self._tools.idempotent(call.name):
                    group.create_task(self._tool(call, open_call.event.id, outputs))
                else:
                    group.create_task(self._in_doubt(open_call, outputs))
        unasked.extend(self._remote_asks + self._tool_asks)  # (a new step's are among its calls)
        if waiting or unasked or self._below:
            asked = await asking.ask(self._scope, unasked) if unasked else []
            raise asking.RunSuspends([*waiting, *asked], below=self._below)
        return [outputs[call.call.id] for call in logged.calls]

    async def _answered(
        self, open_call: LoggedCall, outputs: dict[str, ToolOutput], waiting: list[run_pb2.InputRequest]
    ) -> None:
        """Goes on with a call that asked a person: with the response the registry handed the run
        over with (recorded first, as `input_received`), or the one recorded already — then an
        approved call that has no result may have run, and is in doubt as any such call. A
        request still unanswered joins `waiting`: the run suspends again."""
        scope, call = self._scope, open_call.call
        assert open_call.asked is not None
        request = asking.request_from_event(open_call.asked, scope)
        if open_call.received is not None:
            response, expired = asking.response_from_event(open_call.received), False
            after = asking.outcome(call, request.kind, response, expired=False)
            carrying = asking.tool_answer(open_call.asked, response, expired=False)
            # (An approved delegation is sent once, whoever sends it: never in doubt; a tool that
            # asked may have been sent the answer already.)
            if (after.run or carrying) and call.kind == TOOL and not self._tools.idempotent(call.name):
                await self._in_doubt(open_call, outputs)
                return
        else:
            given = self._resumed_responses.get(request.id)
            if given is None or given.state not in (asking.ANSWERED, asking.EXPIRED):
                waiting.append(request)
                return
            await scope.recorder.record_coalesced([asking.received_event(given, open_call.asked.id)])
            response, expired = given.response, given.state == asking.EXPIRED
            after = asking.outcome(call, request.kind, response, expired=expired)
            carrying = asking.tool_answer(open_call.asked, response, expired=expired)
        if carrying is not None:  # the tool goes on with the answer (and may ask anew)
            call.asked_after = request.id
            await self._tool(call, open_call.event.id, outputs, carrying=carrying)
        elif call.kind == DELEGATION and request.kind == asking.QUESTION:
            result = await remote_questions.go_on(
                self._delegator, scope, open_call, request.id, response, expired=expired
            )
            self._delegated(call, result, outputs, open_call.event.id)
        elif call.kind == DELEGATION:
            if after.run:
                await self._resume_delegation(open_call, outputs)
            else:
                assert after.output is not None
                refused = await self._delegator.refuse(scope, call.name, open_call.event, after.output.text)
                self._delegated(call, refused, outputs)
        elif after.run and not call.error:
            await self._tool(
                dataclasses.replace(call, arguments=after.arguments), open_call.event.id, outputs
            )
        elif after.run:  # approved, but denied by a rule since: refused (`call.error` says why)
            await self._tool(call, open_call.event.id, outputs)
        else:
            await self._tool(call, open_call.event.id, outputs, answer=after.output)

    async def _in_doubt(self, open_call: LoggedCall, outputs: dict[str, ToolOutput]) -> None:
        outputs[open_call.call.id] = await in_doubt.answer(self._scope, open_call)

    async def _resume_delegation(self, open_call: LoggedCall, outputs: dict[str, ToolOutput]) -> None:
        call = open_call.call
        result = await self._delegator.resume(self._scope, call.name, call.task, open_call.event)
        self._delegated(call, result, outputs, open_call.event.id)

    async def _invalid(self, call: PlannedCall, outputs: dict[str, ToolOutput]) -> None:
        await self._scope.error(INVALID_BLOCK, call.error, metadata={"block": call.name})
        outputs[call.id] = ToolOutput(call.error, is_error=True)
