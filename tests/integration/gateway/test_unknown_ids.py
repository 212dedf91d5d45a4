"""No id makes the gateway fail: every route of its OpenAPI schema (REST under /api/v1, the agent
routes, the OpenAI-compatible /v1), every A2A route on all three bindings and every RPC of the
public gRPC services, asked with an unknown id, malformed ids and another tenant's ids, answers a
client error (a 4xx, NOT_FOUND, INVALID_ARGUMENT, …), never a server error (500, INTERNAL,
UNKNOWN), and never serves another tenant's resource.

One walk: each request names one id that is not the caller's, every other id the caller's own
(so the lookup of that one id is what the request reaches)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentmesh.cli.mesh import Mesh
from agentmesh.gateway.http.a2a import a2a_paths
from agentmesh.gateway.v1 import gateway_service_pb2  # noqa: F401  (its services in the pool)
from agentmesh.memory.v1 import memory_service_pb2  # noqa: F401
from agentmesh.registry.v1 import registry_service_pb2  # noqa: F401
from tests.integration.gateway.support import Api, User
from tests.integration.gateway.walk_tenants import Tenant, make_tenant
from tests.mesh import bearer

# An id no resource has, in the shape the mesh's ids have, and ids no resource can have: text
# that is no UUID, a NUL (PostgreSQL's text refuses it); for numbers, one below any and one past
# int64.
UNKNOWN = str(uuid.UUID(int=0xDEAD))
MALFORMED = ["not-a-uuid", "\x00"]
MALFORMED_NUMBERS = ["-1", "9" * 40]
NUMBERS = {"number", "against"}
FAILURES_HTTP = range(500, 600)
Code = grpc.StatusCode
SERVER_FAULTS = {
    Code.INTERNAL,
    Code.UNKNOWN,
    Code.UNAVAILABLE,
    Code.DATA_LOSS,
    Code.UNIMPLEMENTED,
    Code.DEADLINE_EXCEEDED,
}
SKIPPED_SERVICES = {
    "grpc.health.v1.Health",
    *(f"grpc.reflection.{v}.ServerReflection" for v in ("v1", "v1alpha")),
}
STREAM_WAIT_SECONDS = 3.0
# Ids that name nothing of another tenant's in the caller's project: agent types and versions'
# numbers are no tenant's, and a session id is a client's name, unique only within its project
# (another project's session id in the caller's names the caller's session of that name).
NO_TENANTS = {"agent_type_id", "number", "mcp_server_id", "session_id", "context_id"}


@dataclass
class Findings:
    """What the walk saw that it must not: server errors, another tenant served."""

    asked: int = 0
    faults: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        self.asked += 1
        if not ok:
            self.faults.append(what)


def _variants(name: str, other: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(kind, value) of the ids to try in place of the caller's `name`."""
    names = {"project_slug": "no-such-name", "agent_name": "no-such-name", "tenant": "no-such/agent"}
    yield "unknown", names.get(name, UNKNOWN)
    for value in MALFORMED_NUMBERS if name in NUMBERS else MALFORMED:
        yield "malformed", value
    if other.get(name) and name not in NO_TENANTS:
        yield "other", other[name]


# REST and OpenAI routes: bodies that pass validation, so a request reaches its ids (`{name}`).
CHAT = {"messages": [{"role": "user", "content": "hi"}], "session_id": "{session_id}"}
RESPONSE = {"input": "hi", "previous_response_id": "{response_id}"}
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/projects/{project_id}/agents"): {"agent_type_id": "{agent_type_id}", "name": "walked"},
    ("PATCH", "/api/v1/projects/{project_id}/agents/{agent_id}"): {"config": {}},
    ("POST", "/api/v1/projects/{project_id}/sessions/{session_id}/fork"): {"at_seq": 1},
    ("POST", "/api/v1/projects/{project_id}/sessions/{session_id}/move"): {"version": "latest"},
    ("POST", "/api/v1/projects/{project_id}/remote-agents"): {
        "name": "walked",
        "card_url": "https://x.example/c",
    },
    ("POST", "/api/v1/projects/{project_id}/input-requests/{request_id}/respond"): {"answer": "yes"},
    ("POST", "/api/v1/mcp-servers"): {
        **{"name": "walked", "transport": "stdio", "command": "true", "project_id": "{project_id}"}
    },
    ("POST", "/api/v1/api-keys"): {"name": "walked", "project_id": "{project_id}"},
    ("POST", "/v1/chat/completions"): {**CHAT, "model": "{project_slug}/{agent_name}"},
    ("POST", "/agents/{project_slug}/{agent_name}/v1/chat/completions"): CHAT,
    ("POST", "/v1/responses"): {**RESPONSE, "model": "{project_slug}/{agent_name}"},
    ("POST", "/agents/{project_slug}/{agent_name}/v1/responses"): RESPONSE,
}
ID_QUERY = {"session_id", "project_id", "against"}
PLACEHOLDER = re.compile(r"^\{(\w+)\}$")


def _fill(template: Any, ids: dict[str, str]) -> Any:
    """`template` with each `{name}` replaced by `ids[name]`; keys whose id is unknown dropped."""
    if isinstance(template, dict):
        filled = {k: _fill(v, ids) for k, v in template.items()}
        return {k: v for k, v in filled.items() if v is not None}
    if isinstance(template, list):
        return [_fill(v, ids) for v in template]
    if isinstance(template, str):
        named = PLACEHOLDER.match(template)
        if named:
            return ids.get(named.group(1)) or None
        return re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), m.group(0)), template)
    return template


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    path_ids: tuple[str, ...]
    query_ids: tuple[str, ...]
    body: dict[str, Any] | None

    def names(self) -> set[str]:
        body_ids = {m.group(1) for m in re.finditer(r"\{(\w+)\}", json.dumps(self.body or {}))}
        return {*self.path_ids, *self.query_ids, *body_ids}

    def request(self, ids: dict[str, str]) -> tuple[str, dict[str, str], Any]:
        path = re.sub(r"\{(\w+)\}", lambda m: quote(ids.get(m.group(1), ""), safe=""), self.path)
        query = {name: ids[name] for name in self.query_ids if ids.get(name)}
        body = _fill(self.body, ids) if self.body is not None else None
        return path, query, body


def _routes(schema: dict[str, Any]) -> list[Route]:
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            path_ids = tuple(p["name"] for p in parameters if p["in"] == "path")
            query_ids = tuple(p["name"] for p in parameters if p["in"] == "query" and p["name"] in ID_QUERY)
            body = BODIES.get((method.upper(), path), {} if "requestBody" in operation else None)
            found.append(Route(method.upper(), path, path_ids, query_ids, body))
    return found


async def _walk_http(
    http: httpx.AsyncClient, routes: list[Route], me: Tenant, other: Tenant, admin: User, findings: Findings
) -> None:
    mine = {**me.ids(), "against": "1"}

    async def ask(route: Route, name: str, kind: str, value: str, user: User) -> int:
        path, query, body = route.request({**mine, name: value})
        what = f"{route.method} {path} ({name} {kind}, as {'admin' if user is admin else 'owner'})"
        try:
            answer = await http.request(route.method, path, params=query, json=body, headers=user.headers)
        except httpx.HTTPError as error:
            findings.check(False, f"{what}: {error!r}")
            return 0
        # Another tenant's resource named anywhere (path, query, body): refused, never served.
        crossed = kind == "other" and answer.status_code < 400
        findings.check(
            answer.status_code not in FAILURES_HTTP and not crossed,
            f"{what}: {answer.status_code} {answer.text[:300]}",
        )
        return answer.status_code

    async def walk(route: Route) -> None:
        for name in sorted(route.names()):
            for kind, value in _variants(name, other.ids()):
                status = await ask(route, name, kind, value, me.user)
                if status in (401, 403) and kind != "other":
                    await ask(route, name, kind, value, admin)  # past the superuser check too

    await _together([lambda route=route: walk(route) for route in routes])


# A2A, on its two HTTP bindings (the gRPC one is walked with the other RPCs).

MESSAGE = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
A2A_JSONRPC: dict[str, dict[str, Any]] = {
    "SendMessage": {"message": {**MESSAGE, "taskId": "{task_id}"}},
    "SendStreamingMessage": {"message": {**MESSAGE, "contextId": "{context_id}"}},
    "GetTask": {"id": "{task_id}"},
    "CancelTask": {"id": "{task_id}"},
    "SubscribeToTask": {"id": "{task_id}"},
    "ListTasks": {"contextId": "{context_id}"},
    "CreateTaskPushNotificationConfig": {"taskId": "{task_id}", "url": "https://x.example/hook"},
    "GetTaskPushNotificationConfig": {"taskId": "{task_id}", "id": "p"},
    "ListTaskPushNotificationConfigs": {"taskId": "{task_id}"},
    "DeleteTaskPushNotificationConfig": {"taskId": "{task_id}", "id": "p"},
    "GetExtendedAgentCard": {},
}
A2A_REST_BODIES = {"/a2a/rest/tasks/{id}/pushNotificationConfigs": {"url": "https://x.example/hook"}}


async def _walk_a2a_http(http: httpx.AsyncClient, me: Tenant, other: Tenant, findings: Findings) -> None:
    mine = me.ids()
    headers = {**me.user.headers, "A2A-Version": "1.0"}

    async def ask(method: str, path: str, what: str, kind: str, **request: Any) -> None:
        try:
            async with http.stream(method, path, headers=headers, **request) as answer:
                first = await anext(answer.aiter_text(), "")  # a stream's first event is enough
        except httpx.HTTPError as error:
            findings.check(False, f"{what}: {error!r}")
            return
        internal = '"code":-32603' in first.replace(" ", "")
        served = answer.status_code < 300 and '"error"' not in first
        findings.check(
            answer.status_code not in FAILURES_HTTP and not internal and not (kind == "other" and served),
            f"{what}: {answer.status_code} {first[:300]}",
        )

    base = me.agent.base
    jobs: list[Callable[[], Awaitable[None]]] = []
    for method, params in A2A_JSONRPC.items():
        for name in {m.group(1) for m in re.finditer(r"\{(\w+)\}", json.dumps(params))}:
            for kind, value in _variants(name, other.ids()):
                ids = {**mine, name: value}
                rpc = {"jsonrpc": "2.0", "id": 1, "method": method, "params": _fill(params, ids)}
                jobs.append(
                    lambda rpc=rpc, kind=kind, name=name: ask(
                        "POST",
                        f"{base}/a2a/jsonrpc",
                        f"JSON-RPC {rpc['method']} ({name} {kind})",
                        kind,
                        json=rpc,
                    )
                )
    for method, path in a2a_paths():  # HTTP+JSON: the task in the path, or the context listed
        name = "task_id" if "{id}" in path else "context_id" if path.endswith("/tasks") else ""
        for kind, value in _variants(name, other.ids()) if name else ():
            filled = path.replace("{id}", quote(value, safe="")).replace("{push_id}", "p")
            body = A2A_REST_BODIES.get(path)
            query = {"contextId": value} if name == "context_id" else None
            jobs.append(
                lambda m=method, f=filled, b=body, q=query, k=kind, n=name: ask(
                    m, f"{base}{f}", f"{m} {f} ({n} {k})", k, json=b, params=q
                )
            )
    # The agent the path names: unknown, malformed, another tenant's.
    agents = [
        ("unknown", "no-such-project", "no-such-agent"),
        ("other", other.agent.project_slug, other.agent.name),
    ]
    agents += [("malformed", value, "agent") for value in MALFORMED]
    for kind, project, agent in agents:
        for method, path in a2a_paths():
            filled = path.replace("{id}", me.task_id).replace("{push_id}", "p")
            url = f"/agents/{quote(project, safe='')}/{quote(agent, safe='')}{filled}"
            body = (
                {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": me.task_id}}
                if path.endswith("jsonrpc")
                else None
            )
            jobs.append(lambda m=method, u=url, b=body, k=kind: ask(m, u, f"{m} {u} (agent {k})", k, json=b))
    await _together(jobs)


# gRPC: every RPC of every public service, its request's ids filled in.

# What the RPCs are about, longest first: a field named `id` holds the id of the first one its
# message's or its method's name names (`GetAgentType`'s is an `agent_type_id`).
RESOURCES = ["TaskPushNotificationConfig", "InputRequest", "RemoteAgent", "AgentType", "McpServer", "ApiKey"]
RESOURCES += ["Project", "Session", "Agent", "Task", "User"]
SKIPPED_FIELDS = {"request_id", "page_token", "message_id", "update_mask"}  # idempotency keys, cursors


def _id_name(method: MethodDescriptor, message: Descriptor, name: str) -> str | None:
    """The kind of id a string field holds, or None for a field that holds no id."""
    if name in SKIPPED_FIELDS and not (name == "request_id" and "InputRequest" in method.name):
        return None
    if name in ("tenant", "context_id", "task_id", "session_id") or name.endswith("_id"):
        return name
    if name == "id":
        noun = next((n for n in RESOURCES if n in message.name or n in method.name), None)
        return re.sub(r"(?<!^)([A-Z])", r"_\1", noun).lower() + "_id" if noun else None
    return None


def _id_fields(
    method: MethodDescriptor, message: Descriptor, prefix: str = "", depth: int = 0
) -> list[tuple[str, str]]:
    """(dotted path, id kind) of each id field of a request, into its sub-messages."""
    found = []
    for f in message.fields:
        if f.is_repeated:
            continue
        if f.type == FieldDescriptor.TYPE_STRING:
            kind = _id_name(method, message, f.name)
            if kind:
                found.append((prefix + f.name, kind))
        elif (
            f.type == FieldDescriptor.TYPE_MESSAGE
            and depth < 2
            and not f.message_type.full_name.startswith("google.")
        ):
            found += _id_fields(method, f.message_type, f"{prefix}{f.name}.", depth + 1)
    return found


def _set(request: Any, path: str, value: str) -> None:
    *parents, last = path.split(".")
    for name in parents:
        request = getattr(request, name)
    setattr(request, last, value)


def _base_request(method: MethodDescriptor) -> Any:
    request = message_factory.GetMessageClass(method.input_type)()
    if method.input_type.full_name == "lf.a2a.v1.SendMessageRequest":
        request.message.CopyFrom(
            a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hi")])
        )
    return request


async def _served_services(channel: grpc.aio.Channel) -> list[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    asked = reflection_pb2.ServerReflectionRequest(list_services="")
    [answer] = [a async for a in stub.ServerReflectionInfo(iter([asked]))]
    return sorted(s.name for s in answer.list_services_response.service if s.name not in SKIPPED_SERVICES)


async def _walk_grpc(channel: grpc.aio.Channel, me: Tenant, other: Tenant, findings: Findings) -> list[str]:
    mine = me.ids()
    services = await _served_services(channel)
    metadata = bearer(me.user.token)

    async def call(method: MethodDescriptor, request: Any, what: str, kind: str) -> None:
        path = f"/{method.containing_service.full_name}/{method.name}"
        response_type = message_factory.GetMessageClass(method.output_type)
        kwargs = {
            "request_serializer": type(request).SerializeToString,
            "response_deserializer": response_type.FromString,
        }
        code, served = grpc.StatusCode.OK, True
        try:
            if method.server_streaming:
                stream = channel.unary_stream(path, **kwargs)(request, metadata=metadata)
                try:
                    # Served: a message came. A stream still waiting for events after a while (on
                    # a busy machine, a refusal may come later than that) has served nothing.
                    first = await asyncio.wait_for(anext(aiter(stream), None), STREAM_WAIT_SECONDS)
                    served = first is not None
                except TimeoutError:
                    served = False
                finally:
                    stream.cancel()
            else:
                await channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as error:
            code, served = error.code(), False
        findings.check(code not in SERVER_FAULTS and not (kind == "other" and served), f"{what}: {code.name}")

    jobs: list[Callable[[], Awaitable[None]]] = []
    for service_name in services:
        service = descriptor_pool.Default().FindServiceByName(service_name)
        for method in service.methods:
            fields = _id_fields(method, method.input_type)
            for path, kind_of in fields:
                for kind, value in _variants(kind_of, other.ids()):
                    request = _base_request(method)
                    for other_path, other_kind in fields:
                        if mine.get(other_kind):
                            _set(request, other_path, mine[other_kind])
                    _set(request, path, value)
                    what = f"{service_name}/{method.name} ({path} {kind})"
                    jobs.append(lambda m=method, r=request, w=what, k=kind: call(m, r, w, k))
    await _together(jobs)
    return services


async def _together(jobs: list[Callable[[], Awaitable[None]]], width: int = 8) -> None:
    """Runs `jobs`, `width` at a time."""
    gate = asyncio.Semaphore(width)

    async def run(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(run(job) for job in jobs))


async def test_no_id_answers_a_server_error_or_another_tenants_resource(
    api: Api, http: httpx.AsyncClient, mesh: Mesh, backend_url: str
) -> None:
    if not backend_url.startswith("postgresql"):
        pytest.skip("walked on PostgreSQL, the stricter store: SQLite keeps what it refuses")
    me, other = await make_tenant(api, http), await make_tenant(api, http)
    admin = await api.admin()
    mcp = await http.post(
        "/api/v1/mcp-servers",
        json={"name": f"walk-{uuid.uuid4().hex[:6]}", "transport": "stdio", "command": "true"},
        headers=admin.headers,
    )
    assert mcp.status_code == 201, mcp.text
    me.mcp_server_id = mcp.json()["id"]
    findings = Findings()

    routes = _routes((await http.get("/openapi.json")).json())
    await _walk_http(http, routes, me, other, admin, findings)
    await _walk_a2a_http(http, me, other, findings)
    async with grpc.aio.insecure_channel(mesh.gateway.address) as channel:
        services = await _walk_grpc(channel, me, other, findings)

    assert {
        "agentmesh.registry.v1.RegistryService",
        "agentmesh.memory.v1.MemoryService",
        "lf.a2a.v1.A2AService",
    } <= set(services)
    assert len(routes) > 50 and findings.asked > 900, findings.asked
    assert findings.faults == [], f"{len(findings.faults)} of {findings.asked}:\n" + "\n".join(
        findings.faults
    )
    assert (await http.get("/healthz")).status_code == 200
