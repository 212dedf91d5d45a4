"""Bad input is a 4xx / INVALID_ARGUMENT naming the field, and the connection stays usable: lone
surrogates in any text, JSON nested deeper than protobuf can carry, control characters in names,
and over gRPC a request that is not a valid message at all."""

from __future__ import annotations

import json
from typing import Any

import grpc
import httpx
import pytest

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.v1 import gateway_service_pb2 as gw
from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from tests.integration.gateway.support import Api, suffix
from tests.mesh import bearer

LONE_SURROGATE = "\ud800"


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]} if depth % 2 else {"a": value}
    return value


def _assert_names(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert field in response.text, response.text


async def _post(api: Api, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    """POSTs `body` as JSON with its lone surrogates escaped (\\ud800), as JSON allows: httpx's
    own encoder refuses them."""
    headers = {"Content-Type": "application/json", **(headers or {})}
    return await api.http.post(path, content=json.dumps(body), headers=headers)


async def _still_serving(api: Api) -> None:
    response = await api.http.get("/healthz")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("email", LONE_SURROGATE),
        ("password", LONE_SURROGATE),
        ("first_name", LONE_SURROGATE),
        ("last_name", LONE_SURROGATE),
        ("first_name", "\x1b[2J"),
        ("last_name", "\x07"),
    ],
)
async def test_a_lone_surrogate_or_a_control_character_in_registration_is_422_naming_the_field(
    api: Api, field: str, bad: str, once: None
) -> None:
    body = {"email": f"u-{suffix()}@example.com", "password": "a-long-password-1", "first_name": "A"}
    body[field] = f"x{bad}y"
    response = await _post(api, "/api/v1/auth/register", body)
    _assert_names(response, 422, field)
    await _still_serving(api)


async def test_a_lone_surrogate_in_login_is_422(api: Api, once: None) -> None:
    response = await _post(
        api, "/api/v1/auth/login", {"email": f"a{LONE_SURROGATE}@example.com", "password": "whatever-1"}
    )
    _assert_names(response, 422, "email")
    await _still_serving(api)


@pytest.mark.parametrize("name", [f"p {LONE_SURROGATE}", "bell \x07", "escape \x1b[31m"])
async def test_a_project_name_with_a_lone_surrogate_or_a_control_character_is_422(
    api: Api, name: str, once: None
) -> None:
    owner = await api.user()
    response = await _post(api, "/api/v1/projects", {"name": name, "slug": f"p-{suffix()}"}, owner.headers)
    _assert_names(response, 422, "name")
    await _still_serving(api)


async def test_a_name_with_a_control_character_is_refused_over_grpc(mesh: Mesh, api: Api, once: None) -> None:
    owner = await api.user()
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        stub_request = reg.CreateProjectRequest(
            project=resources_pb2.Project(name="ring \x07", slug=f"p-{suffix()}")
        )
        call = channel.unary_unary(
            "/agentmesh.registry.v1.RegistryService/CreateProject",
            request_serializer=reg.CreateProjectRequest.SerializeToString,
            response_deserializer=reg.CreateProjectResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(stub_request, metadata=bearer(owner.token))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "project.name" in (refused.value.details() or "")


async def test_a_lone_surrogate_in_chat_content_is_422(api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=["fine"])
    response = await _post(
        api,
        "/v1/chat/completions",
        {"model": agent.model, "messages": [{"role": "user", "content": f"hi {LONE_SURROGATE}"}]},
        agent.owner.headers,
    )
    _assert_names(response, 422, "messages[0].content")
    await _still_serving(api)


async def test_json_nested_deeper_than_protobuf_allows_is_422_naming_the_field(api: Api, once: None) -> None:
    owner = await api.user()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    response = await api.http.post(
        f"/api/v1/projects/{project['id']}/agents",
        json={
            "agent_type_id": agent_type["id"],
            "name": "deep",
            "config": {"mock_responses": [_nested(150)]},
        },
        headers=owner.headers,
    )
    _assert_names(response, 422, "mock_responses")

    name = f"type-{suffix()}"
    response = await api.http.post(
        "/api/v1/agent-types",
        json={"name": name, "slug": name, "primary_model": "mock", "model_params": {"x": _nested(150)}},
        headers=(await api.admin()).headers,
    )
    _assert_names(response, 422, "model_params")
    await _still_serving(api)


async def test_json_as_deep_as_allowed_is_stored(api: Api, once: None) -> None:
    agent = await api.agent(mock_responses=[{"content": "ok", "extra": _nested(20)}])
    assert agent.id


async def _raw_call(
    channel: grpc.aio.Channel, method: str, payload: bytes, token: str
) -> grpc.aio.AioRpcError:
    call = channel.unary_unary(
        method, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw
    )
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await call(payload, metadata=bearer(token))
    return failed.value


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\xff\xff\xff\xff", id="corrupt wire format"),
        # StreamChatRequest.message (field 2, length-delimited) holding invalid UTF-8.
        pytest.param(b"\x0a\x03a/b\x12\x03\xed\xa0\x80", id="invalid utf-8"),
    ],
)
async def test_an_undecodable_grpc_request_is_invalid_argument_and_the_channel_stays_up(
    mesh: Mesh, api: Api, payload: bytes, once: None
) -> None:
    agent = await api.agent(mock_responses=["still here"])
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        for method in (
            "/agentmesh.gateway.v1.GatewayService/Chat",
            "/agentmesh.registry.v1.RegistryService/Login",
        ):
            error = await _raw_call(channel, method, payload, agent.owner.token)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, error)
            assert "request" in (error.details() or ""), error.details()
        stub = channel.unary_unary(
            "/agentmesh.gateway.v1.GatewayService/Chat",
            request_serializer=gw.ChatRequest.SerializeToString,
            response_deserializer=gw.ChatResponse.FromString,
        )
        answer = await stub(
            gw.ChatRequest(agent=agent.model, message="hello"), metadata=bearer(agent.owner.token)
        )
    assert answer.content == "still here"


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, encoded by hand: protobuf's Python runtime refuses to
    build messages past its depth limit, and a hostile client is not so polite."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deep_mock_responses(depth: int) -> bytes:
    """CreateAgentRequest bytes setting agent.config.mock_responses to [{"a": {"a": … "deep"}}]
    with `depth` objects (merged into the rest of the request, as protobuf merges messages)."""
    value = _field(3, b"deep")  # Value.string_value
    for _ in range(depth):
        entry = _field(1, b"a") + _field(2, value)  # Struct.fields map entry: key, value
        value = _field(5, _field(1, entry))  # Value.struct_value → Struct.fields
    mock_responses = _field(1, value)  # ListValue.values
    numbers = (
        reg.CreateAgentRequest.DESCRIPTOR.fields_by_name["agent"].number,
        resources_pb2.Agent.DESCRIPTOR.fields_by_name["config"].number,
        resources_pb2.AgentConfig.DESCRIPTOR.fields_by_name["mock_responses"].number,
    )
    for number in reversed(numbers):
        mock_responses = _field(number, mock_responses)
    return mock_responses


@pytest.mark.parametrize(("depth", "named"), [(150, False), (28, True)])
async def test_an_over_deep_struct_over_grpc_is_invalid_argument(
    mesh: Mesh, api: Api, depth: int, named: bool, once: None
) -> None:
    owner = await api.user()
    project = await api.project(owner)
    agent_type = await api.agent_type()
    request = reg.CreateAgentRequest(
        agent=resources_pb2.Agent(
            project_id=project["id"],
            agent_type_id=agent_type["id"],
            name="deep",
        )
    )
    payload = request.SerializeToString() + _deep_mock_responses(depth)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        error = await _raw_call(
            channel,
            "/agentmesh.registry.v1.RegistryService/CreateAgent",
            payload,
            owner.token,
        )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    # Past protobuf's own limit the message does not parse at all; below it, the field is named.
    assert ("agent.config.mock_responses" in (error.details() or "")) is named, error.details()


async def test_a_rest_422_lists_its_field_violations_whoever_found_them(api: Api, once: None) -> None:
    """The REST body mirrors gRPC's BadRequest: `field_violations` beside `detail`, whether the
    registry refused the field (a control character) or the gateway's request model did (a
    missing field)."""
    body = {"email": f"u-{suffix()}@example.com", "password": "a-long-password-1", "first_name": "A\x07"}
    refused_by_registry = await _post(api, "/api/v1/auth/register", body)
    missing = await _post(api, "/api/v1/auth/register", {"password": "a-long-password-1"})
    for response, field in ((refused_by_registry, "first_name"), (missing, "email")):
        assert response.status_code == 422, response.text
        answer = response.json()
        assert "detail" in answer, answer
        assert field in [violation["field"] for violation in answer["field_violations"]], answer
        assert all(violation["description"] for violation in answer["field_violations"]), answer
