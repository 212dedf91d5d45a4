"""Observability end to end, every service a separate OS process exporting over OTLP to a test
receiver: one chat — over gRPC, over the OpenAI-compatible HTTP API continuing the caller's
`traceparent`, and with a two-level delegation — is ONE trace with every expected parent → child
edge and no orphan spans; every stored event carries that trace; each service serves its metrics
to Prometheus; and a canary API key, password and JWT used along the way appear in no span, log
line, metric or event."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from rich.console import Console

from agentmesh.cli.trace import events_from_gateway, session_tree
from agentmesh.memory.client import MemoryClient, event_to_dict
from agentmesh.memory.v1 import memory_service_pb2
from tests.bearer import service_channel, system_metadata
from tests.e2e.harness import ServiceProcess, process_environment
from tests.e2e.otlp_receiver import OtlpReceiver, ReceivedSpan, span_tree
from tests.mesh import JWT_SECRET, SUPERUSER_EMAIL, MeshClient, Seeded
from tests.ports import free_loopback_ports

# One mesh for the module (starting four processes is most of the cost), on one event loop.
pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

CANARY_PASSWORD = "canary-Passw0rd-7f3a9c2e"
CANARY_API_KEY = "sk-canary-4b7e2d9a0c1f6e8d3b5a"

STREAM_CHAT = "agentmesh.gateway.v1.GatewayService/StreamChat"
RUN = "agentmesh.internal.executor.v1.ExecutorService/Run"
RESOLVE = "agentmesh.internal.registry.v1.RegistryInternalService/ResolveAgent"
APPEND = "agentmesh.memory.v1.MemoryService/AppendEvents"
SERVICES = ("registry", "memory", "executor", "gateway")


@dataclass
class TracedMesh:
    """The four services as processes, the receiver they export to, and their metrics URLs."""

    processes: dict[str, ServiceProcess]
    receiver: OtlpReceiver
    metrics_urls: dict[str, str]

    @property
    def client(self) -> MeshClient:
        return MeshClient(self.processes["registry"].grpc_address, self.processes["gateway"].grpc_address)

    def logs(self) -> dict[str, str]:
        return {
            path.name: path.read_text(errors="replace")
            for process in self.processes.values()
            for path in (process.stdout_path, process.stderr_path)
        }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def traced_mesh(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TracedMesh]:
    tmp_path = tmp_path_factory.mktemp("traced-mesh")
    async with OtlpReceiver() as receiver:
        registry, memory, executor, gateway, http, *metrics_ports = free_loopback_ports(9)
        metrics_urls = {
            name: f"http://127.0.0.1:{port}/metrics"
            for name, port in zip(SERVICES, metrics_ports, strict=True)
        }
        common = {
            "AGENTMESH_JWT_SECRET": JWT_SECRET,
            "AGENTMESH_REGISTRY_ADDRESS": f"127.0.0.1:{registry}",
            "AGENTMESH_MEMORY_ADDRESS": f"127.0.0.1:{memory}",
            **{
                f"AGENTMESH_{name.upper()}_METRICS_PORT": str(port)
                for name, port in zip(SERVICES, metrics_ports, strict=True)
            },
            **receiver.exporter_environment(),
        }
        environments = {
            "registry": {
                "AGENTMESH_REGISTRY_PORT": str(registry),
                "AGENTMESH_REGISTRY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}",
                "AGENTMESH_SUPERUSER_EMAIL": SUPERUSER_EMAIL,
                "AGENTMESH_SUPERUSER_PASSWORD": CANARY_PASSWORD,
                # Cheap password hashing: the test signs in, it does not measure argon2.
                "AGENTMESH_REGISTRY_PASSWORD_HASH_TIME_COST": "1",
                "AGENTMESH_REGISTRY_PASSWORD_HASH_MEMORY_KIB": "64",
            },
            "memory": {
                "AGENTMESH_MEMORY_PORT": str(memory),
                "AGENTMESH_MEMORY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}",
            },
            "executor": {
                "AGENTMESH_EXECUTOR_PORT": str(executor),
                "AGENTMESH_EXECUTOR_ADVERTISE_ADDRESS": f"127.0.0.1:{executor}",
                "AGENTMESH_EXECUTOR_OPENAI_API_KEY": CANARY_API_KEY,
            },
            "gateway": {
                "AGENTMESH_GATEWAY_PORT": str(gateway),
                "AGENTMESH_GATEWAY_HTTP_PORT": str(http),
                "AGENTMESH_GATEWAY_EXECUTOR_ADDRESSES": json.dumps([f"127.0.0.1:{executor}"]),
                "AGENTMESH_GATEWAY_EXECUTOR_HEALTH_INTERVAL_SECONDS": "0.2",
            },
        }
        processes = {
            name: ServiceProcess.serve(name, env={**common, **environments[name]}, log_dir=tmp_path)
            for name in SERVICES
        }
        try:
            # Registry and memory call nobody; the gateway starts last, so its first dial of the
            # executor finds it serving (not in reconnect backoff).
            await asyncio.gather(processes["registry"].start(), processes["memory"].start())
            await processes["executor"].start()
            await processes["gateway"].start()
            yield TracedMesh(processes, receiver, metrics_urls)
        finally:
            for name in reversed(SERVICES):
                await processes[name].stop()


async def test_a_process_exports_its_spans_over_otlp_to_the_receiver(tmp_path: Path) -> None:
    script = (
        "from agentmesh.runtime.telemetry import configure_tracing, tracer\n"
        "provider = configure_tracing('agentmesh-smoke')\n"
        "with tracer().start_as_current_span('smoke', attributes={'agentmesh.step': 1}):\n"
        "    pass\n"
        "provider.shutdown()\n"
    )
    async with OtlpReceiver() as receiver:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            env=process_environment(receiver.exporter_environment()),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=tmp_path,
        )
        output, _ = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, output.decode()
        await receiver.wait_for(lambda spans: any(s.name == "smoke" for s in spans))

    (span,) = receiver.spans
    assert (span.service, span.kind, span.attributes) == (
        "agentmesh-smoke",
        "INTERNAL",
        {"agentmesh.step": 1},
    )
    assert len(span.trace_id) == 32 and len(span.span_id) == 16 and span.parent_span_id == ""


async def test_one_chat_is_one_trace_across_four_processes_and_leaks_no_secret(
    traced_mesh: TracedMesh,
) -> None:
    client = traced_mesh.client
    try:
        jwt = await client.login(SUPERUSER_EMAIL, CANARY_PASSWORD)
        seeded = await client.seed_agent(jwt, name="greeter", mock_responses=["hello, traced"])
        responses = await client.stream_chat(seeded, "trace me", session_id="s-traced-chat")
    finally:
        await client.close()
    assert responses[-1].event.run_completed.content == "hello, traced"

    chat = await _chat_trace(traced_mesh.receiver, "s-traced-chat")
    tree = span_tree(chat.spans)
    executor_run = chat.child_of(
        chat.child_of(chat.root, RUN, "CLIENT", "gateway"), RUN, "SERVER", "executor"
    )
    run = chat.descendant(executor_run, "run greeter", "executor")
    resolve_client = chat.descendant(executor_run, RESOLVE, "executor", kind="CLIENT")
    chat.child_of(resolve_client, RESOLVE, "SERVER", "registry")
    appends = chat.all(APPEND, "SERVER", "memory")
    assert len(appends) >= 2, tree
    for append in appends:
        assert chat.is_below(append, run), f"{append.name} outside the run\n{tree}"
    model = [s for s in chat.spans if s.attributes.get("gen_ai.request.model") == "mock"]
    assert len(model) == 1 and chat.is_below(model[0], run), tree
    assert model[0].attributes["gen_ai.system"] == "mock"
    assert model[0].attributes.get("gen_ai.usage.output_tokens", 0) > 0

    events = await _session_events(traced_mesh, "s-traced-chat")
    assert {e["event_type"] for e in events} >= {"user_message", "agent_response"}
    span_ids = {s.span_id for s in chat.spans}
    for event in events:
        assert event["trace_id"] == chat.trace_id, event
        assert event["span_id"] in span_ids, event

    async with httpx.AsyncClient(base_url=traced_mesh.processes["gateway"].http_url) as http:
        assert (await http.get("/healthz")).status_code == 200
    scraped = await _scrape_all(traced_mesh.metrics_urls)
    for name, service in (
        ("gateway", "agentmesh.gateway.v1.GatewayService"),
        ("executor", "agentmesh.internal.executor.v1.ExecutorService"),
        ("registry", "agentmesh.registry.v1.RegistryService"),
        ("memory", "agentmesh.memory.v1.MemoryService"),
    ):
        assert "rpc_server_call_duration_seconds_count{rpc_method=" in scraped[name], name
        assert f'rpc_service="{service}"' in scraped[name], name
        assert "process_resident_memory_bytes" in scraped[name], name
    assert 'rpc_client_call_duration_seconds_count{rpc_method="Run"' in scraped["gateway"]
    assert "http_server_request_duration_seconds" in scraped["gateway"]

    _assert_no_secret(
        jwt,
        spans=traced_mesh.receiver.spans,
        logs=traced_mesh.logs(),
        metrics=scraped,
        events=events,
    )
    _assert_json_logs_with_trace_ids(traced_mesh.logs())


async def test_a_two_level_delegation_is_one_trace(traced_mesh: TracedMesh) -> None:
    client = traced_mesh.client
    try:
        jwt = await client.login(SUPERUSER_EMAIL, CANARY_PASSWORD)
        helper = await client.seed_agent(jwt, name="helper", mock_responses=["item 7 is fine"])
        await _seed_delegating(client, jwt, "worker", to="helper", task="Check item 7", project=helper)
        coordinator = await _seed_delegating(
            client, jwt, "coordinator", to="worker", task="Process task 42", project=helper
        )
        responses = await client.stream_chat(
            coordinator, "Plan the release", session_id="s-traced-delegation"
        )
    finally:
        await client.close()
    assert responses[-1].event.run_completed.content == "coordinator done", responses[-1]
    assert {r.event.agent for r in responses} >= {"coordinator", "worker", "helper"}

    chat = await _chat_trace(traced_mesh.receiver, "s-traced-delegation", runs=3)
    tree = span_tree(chat.spans)
    runs = {
        name: chat.one(f"run {name}", "INTERNAL", "executor") for name in ("coordinator", "worker", "helper")
    }
    for parent, child in (("coordinator", "worker"), ("worker", "helper")):
        delegate = chat.descendant(runs[parent], f"delegate {child}", "executor")
        run_client = chat.descendant(delegate, RUN, "executor", kind="CLIENT")
        run_server = chat.child_of(run_client, RUN, "SERVER", "executor")
        assert chat.is_below(runs[child], run_server), f"{child} not below {parent}'s delegation\n{tree}"
    assert chat.is_below(runs["coordinator"], chat.root)
    for append in chat.all(APPEND, "SERVER", "memory"):
        assert any(chat.is_below(append, run) for run in runs.values()), tree

    events = await _session_events(traced_mesh, "s-traced-delegation")
    assert {e["agent"] for e in events} == {"coordinator", "worker", "helper"}
    assert {e["trace_id"] for e in events} == {chat.trace_id}

    # `agentmesh trace` over the gateway's REST API: the three runs, each below its delegation.
    through_gateway = await events_from_gateway(
        "s-traced-delegation",
        traced_mesh.processes["gateway"].http_url,
        project_id=helper.project_id,
        token=jwt,
    )
    assert [e["seq"] for e in through_gateway] == [e["seq"] for e in events]
    console = Console(record=True, width=200, color_system=None)
    console.print(session_tree("s-traced-delegation", through_gateway))
    lines = console.export_text().splitlines()
    assert "3 runs" in lines[0], "\n".join(lines)
    indent = {}
    for name in ("coordinator", "worker", "helper"):
        (line,) = [line for line in lines if f"{name} run " in line]
        indent[name] = len(line) - len(line.lstrip(" │├└─"))
    assert indent["coordinator"] < indent["worker"] < indent["helper"], "\n".join(lines)
    _assert_no_secret(
        jwt, spans=traced_mesh.receiver.spans, logs=traced_mesh.logs(), metrics={}, events=events
    )


async def test_an_openai_http_chat_continues_the_callers_trace_through_every_hop(
    traced_mesh: TracedMesh,
) -> None:
    trace_id, parent_span_id = "5e1f00d5c0ffee0000000000000000aa", "00000000000000ab"
    client = traced_mesh.client
    try:
        jwt = await client.login(SUPERUSER_EMAIL, CANARY_PASSWORD)
        seeded = await client.seed_agent(jwt, name="speaker", mock_responses=["hello over http"])
    finally:
        await client.close()
    headers = {
        "authorization": f"Bearer {jwt}",
        "traceparent": f"00-{trace_id}-{parent_span_id}-01",
        "x-session-id": "s-traced-http",
    }
    body = {"model": seeded.ref, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with (
        httpx.AsyncClient(base_url=traced_mesh.processes["gateway"].http_url, timeout=30.0) as http,
        http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"

    await traced_mesh.receiver.wait_for(
        lambda spans: any(s.trace_id == trace_id and s.name == "run speaker" for s in spans)
    )
    await asyncio.sleep(0.5)
    spans = traced_mesh.receiver.in_trace(trace_id)
    tree = span_tree(spans)
    by_id = {s.span_id: s for s in spans}
    http_server = [s for s in spans if s.service == "agentmesh-gateway" and s.kind == "SERVER"]
    assert len(http_server) == 1 and http_server[0].parent_span_id == parent_span_id, tree
    assert http_server[0].name == "POST /v1/chat/completions", tree
    orphans = [s for s in spans if s is not http_server[0] and s.parent_span_id not in by_id]
    assert not orphans, f"orphan spans {[s.name for s in orphans]}\n{tree}"
    chat = ChatTrace(trace_id, http_server[0], spans)
    executor_run = chat.descendant(http_server[0], RUN, "executor", kind="SERVER")
    chat.descendant(executor_run, "run speaker", "executor")
    assert chat.all(APPEND, "SERVER", "memory"), tree
    _assert_no_secret(jwt, spans=spans, logs=traced_mesh.logs(), metrics={}, events=[])


# --- helpers ------------------------------------------------------------------------------------


async def _seed_delegating(
    client: MeshClient, jwt: str, name: str, *, to: str, task: str, project: Seeded
) -> Seeded:
    delegate = {"content": "", "tool_calls": [{"name": "delegate", "arguments": {"agent": to, "task": task}}]}
    return await client.seed_agent(
        jwt, name=name, mock_responses=[delegate, f"{name} done"], network_access=[to], project=project
    )


@dataclass
class ChatTrace:
    """The spans of one trace, with the questions the assertions ask of them."""

    trace_id: str
    root: ReceivedSpan
    spans: list[ReceivedSpan]

    def parent(self, span: ReceivedSpan) -> ReceivedSpan | None:
        return next((s for s in self.spans if s.span_id == span.parent_span_id), None)

    def is_below(self, span: ReceivedSpan, ancestor: ReceivedSpan) -> bool:
        current = self.parent(span)
        while current is not None:
            if current is ancestor:
                return True
            current = self.parent(current)
        return False

    def all(self, name: str, kind: str, service: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if (s.name, s.kind, s.service) == (name, kind, f"agentmesh-{service}")]

    def one(self, name: str, kind: str, service: str) -> ReceivedSpan:
        found = self.all(name, kind, service)
        assert len(found) == 1, f"{len(found)} spans {service} {kind} {name}\n{span_tree(self.spans)}"
        return found[0]

    def child_of(self, parent: ReceivedSpan, name: str, kind: str, service: str) -> ReceivedSpan:
        found = [s for s in self.all(name, kind, service) if s.parent_span_id == parent.span_id]
        assert len(found) == 1, f"no {service} {kind} {name} below {parent.name}\n{span_tree(self.spans)}"
        return found[0]

    def depth(self, span: ReceivedSpan) -> int:
        parent, depth = self.parent(span), 0
        while parent is not None:
            parent, depth = self.parent(parent), depth + 1
        return depth

    def descendant(
        self, ancestor: ReceivedSpan, name: str, service: str, *, kind: str = "INTERNAL"
    ) -> ReceivedSpan:
        """The nearest span so named below `ancestor`."""
        found = [s for s in self.all(name, kind, service) if self.is_below(s, ancestor)]
        assert found, f"no {service} {kind} {name} below {ancestor.name}\n{span_tree(self.spans)}"
        return min(found, key=self.depth)


async def _chat_trace(receiver: OtlpReceiver, session_id: str, *, runs: int = 1) -> ChatTrace:
    """The trace of the chat in `session_id`, once its spans have arrived, checked to be whole:
    one root (the gateway's StreamChat), every other span's parent in the trace, and no span of
    a chat's work (runs, steps, model calls, delegations, executor calls, memory appends) in a
    trace that is not a chat's."""

    def complete(spans: list[ReceivedSpan]) -> bool:
        runs_done = [s for s in spans if s.attributes.get("agentmesh.session_id") == session_id]
        return len(runs_done) >= runs and any(s.name == STREAM_CHAT and s.kind == "SERVER" for s in spans)

    await receiver.wait_for(complete)
    await asyncio.sleep(0.5)  # stragglers: spans that end after the chat's answer (run bookkeeping)
    run_span = next(s for s in receiver.spans if s.attributes.get("agentmesh.session_id") == session_id)
    trace_id = run_span.trace_id
    spans = receiver.in_trace(trace_id)
    tree = span_tree(spans)
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 1, f"{len(roots)} roots in the chat's trace\n{tree}"
    root = roots[0]
    assert (root.service, root.kind, root.name) == ("agentmesh-gateway", "SERVER", STREAM_CHAT), tree
    ids = {s.span_id for s in spans}
    orphans = [s for s in spans if s.parent_span_id and s.parent_span_id not in ids]
    assert not orphans, f"orphan spans {[s.name for s in orphans]}\n{tree}"
    # Work that only a chat causes, found in a trace that is not a chat's: context was lost.
    chats = {s.trace_id for s in receiver.spans if s.service == "agentmesh-gateway" and s.kind == "SERVER"}
    elsewhere = [
        s
        for s in receiver.spans
        if s.trace_id != trace_id
        and (
            s.attributes.get("agentmesh.session_id") == session_id
            or (
                s.trace_id not in chats
                and (
                    s.name in (RUN, APPEND)
                    or s.name.startswith(
                        ("run ", "delegate ", "sub_agent ", "chat ", "step ", "execute_tool ")
                    )
                )
            )
        )
    ]
    assert not elsewhere, "spans of the chat outside its trace:\n" + span_tree(elsewhere)
    return ChatTrace(trace_id, root, spans)


async def _session_events(mesh: TracedMesh, session_id: str) -> list[dict]:
    async with service_channel(mesh.processes["memory"].grpc_address) as channel:
        request = memory_service_pb2.ListEventsRequest(session_id=session_id, page_size=1000)
        return [
            event_to_dict(e)
            async for e in MemoryClient(channel).iter_events(request, metadata=system_metadata())
        ]


async def _scrape_all(urls: dict[str, str]) -> dict[str, str]:
    async with httpx.AsyncClient(timeout=5.0) as http:
        responses = await asyncio.gather(*(http.get(url) for url in urls.values()))
    for name, response in zip(urls, responses, strict=True):
        assert response.status_code == 200, (name, response.status_code)
    return {name: response.text for name, response in zip(urls, responses, strict=True)}


def _assert_no_secret(
    jwt: str,
    *,
    spans: Iterable[ReceivedSpan],
    logs: dict[str, str],
    metrics: dict[str, str],
    events: Iterable[dict],
) -> None:
    canaries = {
        "API key": CANARY_API_KEY,
        "password": CANARY_PASSWORD,
        "JWT": jwt,
        "JWT signature": jwt[-20:],
    }
    places = {
        **{f"span {s.service} {s.name}": s.text() for s in spans},
        **{f"log {name}": text for name, text in logs.items()},
        **{f"metrics of {name}": text for name, text in metrics.items()},
        **{f"event #{e['seq']}": json.dumps(e) for e in events},
    }
    leaks = [
        f"{what} in {where}"
        for where, text in places.items()
        for what, secret in canaries.items()
        if secret in text
    ]
    assert not leaks, leaks


def _assert_json_logs_with_trace_ids(logs: dict[str, str]) -> None:
    """The services' log lines (stderr, not a terminal) are JSON objects with trace_id and
    span_id; lines of gRPC's C core and the harness's headers are not ours."""
    ours = 0
    for name, text in logs.items():
        if not name.endswith(".stderr.log"):
            continue
        for line in text.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                assert {"time", "level", "logger", "message", "trace_id", "span_id"} <= set(record), line
                ours += 1
    assert ours >= 4, "every service logs at least its start as JSON"
