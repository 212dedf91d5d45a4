"""The `A2A-Version` header (gRPC: `a2a-version` metadata) is honoured on every binding: 1.x is
served, another major version is refused with the spec's VersionNotSupportedError, and the A2A
routes stay behind the gateway's authorization."""

from __future__ import annotations

import grpc
import httpx
from a2a.types import a2a_pb2, a2a_pb2_grpc

from agentmesh.cli.mesh import Mesh
from tests.integration.gateway.support import Api
from tests.mesh import bearer

GET_TASK = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-run~no-session"}}


async def test_http_bindings_refuse_another_major_version(
    api: Api, http: httpx.AsyncClient, once: None
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    rpc = f"{agent.base}/a2a/jsonrpc"

    served = await http.post(rpc, json=GET_TASK, headers={**agent.owner.headers, "A2A-Version": "1.0"})
    assert served.json()["error"]["message"] == "task 'no-run~no-session' not found"
    refused = await http.post(rpc, json=GET_TASK, headers={**agent.owner.headers, "A2A-Version": "2.0"})
    assert "2.0" in refused.json()["error"]["message"]

    rest = f"{agent.base}/a2a/rest/tasks/no-run~no-session"
    assert (await http.get(rest, headers={**agent.owner.headers, "A2A-Version": "1.0"})).status_code == 404
    wrong = await http.get(rest, headers={**agent.owner.headers, "A2A-Version": "2.0"})
    assert wrong.status_code == 400 and "2.0" in wrong.text

    # No token, no A2A: the gateway's authorization comes first.
    assert (await http.post(rpc, json=GET_TASK, headers={"A2A-Version": "1.0"})).status_code == 401
    stranger = await api.user()
    assert (
        await http.post(rpc, json=GET_TASK, headers={**stranger.headers, "A2A-Version": "1.0"})
    ).status_code == 404


async def test_grpc_refuses_another_major_version_and_an_unnamed_agent(
    api: Api, mesh: Mesh, once: None
) -> None:
    agent = await api.agent(mock_responses=["hi"])
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = a2a_pb2.GetTaskRequest(tenant=agent.model, id="no-run~no-session")
        for version, code in (
            ("1.0", grpc.StatusCode.NOT_FOUND),
            ("2.0", grpc.StatusCode.FAILED_PRECONDITION),
        ):
            try:
                await stub.GetTask(request, metadata=(*bearer(agent.owner.token), ("a2a-version", version)))
            except grpc.aio.AioRpcError as error:
                assert error.code() == code, (version, error.details())
            else:
                raise AssertionError(f"GetTask of an unknown task answered under version {version}")
        try:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="x"), metadata=bearer(agent.owner.token))
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "tenant" in (error.details() or "")
        else:
            raise AssertionError("a request without a tenant was served")
