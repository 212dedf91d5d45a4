"""Each A2A error the gateway sends, as the wire carries it on each binding: the JSON-RPC code,
the HTTP status (with the ErrorInfo reason the spec requires in the details) and the gRPC status
of the spec's mapping table (A2A v1.0.1, §5.4). Read off the wire, not through the SDK client,
which maps all of them back to the same exceptions whatever the codes. The table's other four
no request can provoke from the gateway: InvalidAgentResponseError is a client's verdict on a
server's answer, every agent has an extended card (ExtendedAgentCardNotConfiguredError), none
requires an extension (ExtensionSupportRequiredError) and every agent takes push notification
configs (PushNotificationNotSupportedError)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import httpx
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf.json_format import ParseDict

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Agent, Api
from tests.mesh import bearer

VERSION = {"A2A-Version": "1.0"}


@dataclass(frozen=True)
class Case:
    """One A2A error: how to provoke it on each binding, and what each must answer."""

    error: str
    jsonrpc_code: int
    http_status: int
    grpc_status: grpc.StatusCode
    method: str  # the JSON-RPC and gRPC method
    params: dict[str, Any]  # JSON-RPC params, also the gRPC request (ProtoJSON)
    rest: tuple[str, str, dict[str, Any] | None]  # HTTP method, path under …/a2a/rest, JSON body
    version: str = "1.0"  # the A2A version the client asks for


def _message(part: dict[str, str], **fields: str) -> dict[str, Any]:
    return {"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [part], **fields}}


def _cases(ended: str) -> list[Case]:
    follow_up = _message({"text": "more"}, taskId=ended)
    file = _message({"raw": "eA=="})
    return [
        Case(
            "TASK_NOT_FOUND", -32001, 404, grpc.StatusCode.NOT_FOUND,
            "GetTask", {"id": "no-run~no-session"}, ("GET", "/tasks/no-run~no-session", None),
        ),
        Case(
            "TASK_NOT_CANCELABLE", -32002, 400, grpc.StatusCode.FAILED_PRECONDITION,
            "CancelTask", {"id": ended}, ("POST", f"/tasks/{ended}:cancel", {}),
        ),
        Case(
            "UNSUPPORTED_OPERATION", -32004, 400, grpc.StatusCode.FAILED_PRECONDITION,
            "SendMessage", follow_up, ("POST", "/message:send", follow_up),
        ),
        Case(
            "CONTENT_TYPE_NOT_SUPPORTED", -32005, 400, grpc.StatusCode.INVALID_ARGUMENT,
            "SendMessage", file, ("POST", "/message:send", file),
        ),
        Case(
            "INVALID_PARAMS", -32602, 400, grpc.StatusCode.INVALID_ARGUMENT,
            "ListTasks", {"pageSize": 0}, ("GET", "/tasks?pageSize=0", None),
        ),
        Case(
            "VERSION_NOT_SUPPORTED", -32009, 400, grpc.StatusCode.FAILED_PRECONDITION,
            "GetTask", {"id": ended}, ("GET", f"/tasks/{ended}", None), version="2.0",
        ),
    ]  # fmt: skip


async def _ended_task(http: httpx.AsyncClient, agent: Agent) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    sent = await http.post(f"{agent.base}/a2a/jsonrpc", json=body, headers={**agent.owner.headers, **VERSION})
    task = sent.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return str(task["id"])


async def test_every_error_has_the_specs_code_on_every_binding(
    api: Api, http: httpx.AsyncClient, mesh: Mesh, once: None
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    ended = await _ended_task(http, agent)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for case in _cases(ended):
            headers = {**agent.owner.headers, "A2A-Version": case.version}
            rpc = {"jsonrpc": "2.0", "id": 1, "method": case.method, "params": case.params}
            answer = await http.post(f"{agent.base}/a2a/jsonrpc", json=rpc, headers=headers)
            assert answer.json()["error"]["code"] == case.jsonrpc_code, (case.error, answer.text)

            method, path, body = case.rest
            answer = await http.request(method, f"{agent.base}/a2a/rest{path}", json=body, headers=headers)
            assert answer.status_code == case.http_status, (case.error, answer.text)
            reasons = [d.get("reason") for d in answer.json()["error"]["details"]]
            assert case.error in reasons, (case.error, answer.text)

            request_type = getattr(a2a_pb2, f"{case.method}Request", None) or a2a_pb2.SendMessageRequest
            request = ParseDict({**case.params, "tenant": agent.model}, request_type())
            try:
                metadata = (*bearer(agent.owner.token), ("a2a-version", case.version))
                await getattr(stub, case.method)(request, metadata=metadata)
            except grpc.aio.AioRpcError as error:
                assert error.code() == case.grpc_status, (case.error, error.details())
            else:
                raise AssertionError(f"{case.method} answered without {case.error} on gRPC")
