"""The client's tools as a run offers them (loops/client_tools.py) and how a call of one goes on
after its request's response (loops/asking.py): the model is told which one it must call, a
client tool named as one of the agent's is refused, and the client's result — or its absence at
the expiry — is the call's output."""

from __future__ import annotations

import pytest

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.context.scope import RunFailure
from agentmesh.executor.durability.run_log import TOOL, PlannedCall
from agentmesh.executor.loops import asking, client_tools
from agentmesh.internal.executor.v1 import executor_service_pb2

WEATHER = executor_service_pb2.ClientTool(
    name="get_weather", description="The weather.", parameters_json='{"type": "object"}'
)


def request(choice: str = "") -> executor_service_pb2.RunRequest:
    return executor_service_pb2.RunRequest(client_tools=[WEATHER], client_tool_choice=choice)


def told(choice: str, *, function_calling: bool = True, native: bool = False) -> str:
    return "\n".join(
        m.content
        for m in client_tools.instruction(
            request(choice), function_calling=function_calling, native_tool_choice=native
        )
    )


def test_the_model_is_told_which_tool_it_must_call() -> None:
    assert told("") == ""
    assert "must call at least one of these tools: get_weather" in told("required")
    assert "must call the tool get_weather" in told("get_weather")
    assert "get_weather: The weather." in told("", function_calling=False)  # called in fenced blocks
    assert told("required", native=True) == ""  # the model takes it as its own tool_choice


def test_a_client_tool_named_as_the_agents_own_is_refused() -> None:
    client_tools.check(request(), {"get_current_time"})
    with pytest.raises(RunFailure, match=r"tools\[0\].function.name"):
        client_tools.check(request(), {"get_weather"})
    delegate = executor_service_pb2.RunRequest(
        client_tools=[executor_service_pb2.ClientTool(name="delegate")]
    )
    with pytest.raises(RunFailure):
        client_tools.check(delegate, set())


def test_the_clients_result_is_the_calls_output_and_an_expiry_says_none_came() -> None:
    call = PlannedCall(TOOL, "c1", "get_weather", {"city": "Paris"}, permission=client_tools.CLIENT)
    assert asking.asks(call) == asking.CLIENT_TOOL
    answered = asking.outcome(call, asking.CLIENT_TOOL, run_pb2.InputResponse(answer="18C"), expired=False)
    assert not answered.run and answered.output is not None and answered.output.text == "18C"
    denial = run_pb2.InputResponse(decision=asking.DENY, reason="expired", responder="system")
    expired = asking.outcome(call, asking.CLIENT_TOOL, denial, expired=True)
    assert expired.output is not None and expired.output.is_error
    assert "the client gave no result" in expired.output.text
