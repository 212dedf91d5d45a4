"""One benchmark run: start the baselines and the mesh as separate processes on loopback, measure
every figure as a ratio against a baseline measured in the same run, and return the
results.

Order of work: PostgreSQL (throwaway, from the local binaries, or the server
`AGENTMESH_TEST_DATABASE_URL` names), the raw gRPC processes (echo server and two proxies), one
mesh; then the sections, one module each (`bench/chat_latency.py`, `bench/tracing.py`, and so
on), each of which may fail on its own (its figures are then None with the reason) without costing
the others. The tracing section starts a second, traced mesh beside the first and stops it
afterwards; the streams and tenants sections run last, as they are the heaviest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import asyncpg
from google.protobuf import field_mask_pb2
from sqlalchemy.engine import make_url

from agentmesh.registry.v1 import registry_service_pb2 as reg
from agentmesh.registry.v1 import resources_pb2
from bench.appends import appends
from bench.chains import FloorChain, RawChain
from bench.chat_latency import chat_latency
from bench.counting import counting_env
from bench.delegation import delegation
from bench.history import history
from bench.http_vs_grpc import http_vs_grpc
from bench.mesh import GrpcChat, Mesh, start_mesh
from bench.plan import Plan
from bench.report import REPO, Results, machine_info
from bench.stats import warm_up
from bench.streams import streams
from bench.tenants import tenants
from bench.throughput import chat_throughput
from bench.tracing import exporter_env, tracing
from tests.e2e.harness import ServiceProcess
from tests.mesh import MeshClient, Seeded, bearer
from tests.postgres import fresh_database, libpq_dsn, postgres_server_url

logger = logging.getLogger(__name__)


async def run(plan: Plan, *, log_dir: Path, only: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Measures everything `plan` asks for (only the `SECTIONS` named in `only`, when given:
    a quicker run while working on one figure); returns the results document."""

    def wanted(section: str) -> bool:
        return not only or section in only

    results = Results(plan=plan.name)
    results.details["plan"] = asdict(plan)
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        server_url = stack.enter_context(postgres_server_url())
        raw_url = await stack.enter_async_context(fresh_database(server_url))
        mesh_url = await stack.enter_async_context(fresh_database(server_url))
        postgres_version = await _postgres_version(raw_url)
        machine = machine_info(postgres_version)

        chain = await stack.enter_async_context(RawChain.start(log_dir))
        floor = await stack.enter_async_context(FloorChain.start(log_dir, libpq_dsn(raw_url)))
        sink = ServiceProcess(
            "otlp-sink", [sys.executable, "-m", "bench.otlp_sink"], env={}, log_dir=log_dir, cwd=REPO
        )
        await sink.start(timeout=30)
        stack.push_async_callback(sink.stop)
        traced_url = await stack.enter_async_context(fresh_database(server_url))
        # Both meshes start together (most of a smoke run's time is starting processes); the
        # traced one is stopped as soon as the tracing section is done with it.
        mesh, traced = await asyncio.gather(
            start_mesh("mesh", database_url=mesh_url, log_dir=log_dir, extra_env=counting_env(log_dir)),
            start_mesh("traced", database_url=traced_url, log_dir=log_dir, extra_env=exporter_env(sink)),
            return_exceptions=True,
        )
        for started_mesh in (mesh, traced):
            if isinstance(started_mesh, Mesh):
                stack.push_async_callback(started_mesh.stop)
        if isinstance(mesh, BaseException):
            raise mesh
        client = mesh.client()
        stack.push_async_callback(client.close)
        token = await client.login()
        assistant = await client.seed_agent(token, name="assistant", mock_responses=["hello, one step"])
        await _unbounded(client, token, assistant)
        chat = GrpcChat(mesh.channel(mesh.gateway_address), assistant)
        await warm_up(chat, plan.warmup_calls)

        if wanted("chat"):
            await chat_latency(plan, results, chain, floor, mesh, chat, make_url(server_url).port)
        if wanted("tracing"):
            # Early, while both meshes hold as little data as each other.
            await tracing(plan, results, traced, sink, chat)
        if wanted("throughput"):
            await chat_throughput(plan, results, chain, floor, chat)
        if wanted("http"):
            await http_vs_grpc(plan, results, mesh, assistant, chat)
        if wanted("delegation"):
            await delegation(plan, results, mesh, client, token, assistant)
        if wanted("history"):
            await history(plan, results, mesh, client, token, assistant)
        if wanted("appends"):
            await appends(plan, results, mesh, raw_url, mesh_url, assistant, log_dir)
        if wanted("streams"):
            await streams(plan, results, mesh, client, token, assistant)
        if wanted("tenants"):
            await tenants(plan, results, mesh, client, token)

    machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return results.to_json(machine, duration_seconds=round(time.monotonic() - started, 1))


async def _unbounded(client: MeshClient, token: str, assistant: Seeded) -> None:
    """The sections before `tenants` measure one tenant's capacity (5,000 streams at once): its
    project has no limit on runs at once, not the default share of the pool (docs/tenants.md).
    The tenants section's own projects keep the defaults."""
    unlimited = resources_pb2.Project(
        id=assistant.project_id, limits=resources_pb2.ProjectLimits(concurrent_runs=0)
    )
    request = reg.UpdateProjectRequest(
        project=unlimited, update_mask=field_mask_pb2.FieldMask(paths=["limits"])
    )
    await client.registry.UpdateProject(request, metadata=bearer(token))


async def _postgres_version(url: str) -> str:
    connection = await asyncpg.connect(libpq_dsn(url))
    try:
        return str(await connection.fetchval("SHOW server_version"))
    finally:
        await connection.close()
