"""Fake executors for RunRouter's users: small ExecutorServices on real gRPC servers (port 0),
a fake registry membership, and a router over them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest_asyncio

from agentmesh.common.v1 import run_pb2
from agentmesh.executor.client import RunRouter, SystemToken
from agentmesh.internal.executor.v1 import executor_service_pb2 as pb
from agentmesh.internal.executor.v1 import executor_service_pb2_grpc as pb_grpc
from agentmesh.registry.v1 import resources_pb2
from agentmesh.runtime.errors import DomainError
from agentmesh.runtime.identity import TokenCodec
from agentmesh.runtime.server import GrpcServer, ServiceBinding, start_server

Serve = Callable[["FakeExecutor"], Awaitable[GrpcServer]]
SECRET = "s" * 32

SERVICE = pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name


class FakeExecutor(pb_grpc.ExecutorServiceServicer):
    """Answers every run with `answer`, or fails with `fail` (before the first event, or after
    it with `fail_after_start`); remembers who called."""

    def __init__(
        self, *, fail: DomainError | None = None, fail_after_start: bool = False, answer: str = "ok"
    ) -> None:
        self.fail, self.fail_after_start, self.answer = fail, fail_after_start, answer
        self.tokens: list[str] = []
        self.cancelled: list[tuple[str, str]] = []

    async def Run(
        self, request: pb.RunRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.RunResponse]:
        self.tokens.append(dict(context.invocation_metadata()).get("authorization", ""))
        if self.fail is not None and not self.fail_after_start:
            raise self.fail
        yield pb.RunResponse(event=run_pb2.RunEvent(run_id="r", run_started=run_pb2.RunStarted()))
        if self.fail is not None:
            raise self.fail
        completed = run_pb2.RunCompleted(content=self.answer)
        yield pb.RunResponse(event=run_pb2.RunEvent(run_id="r", run_completed=completed))

    async def CancelRuns(
        self, request: pb.CancelRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelRunsResponse:
        self.cancelled.append((request.project_id, request.agent_id))
        return pb.CancelRunsResponse(cancelled_runs=1)


class FakeRegistry:
    """The registry's executor membership, as RunRouter asks for it."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.metadata: list[object] = []

    async def list_executors(self, *, metadata: object = None) -> list[resources_pb2.Executor]:
        self.metadata.append(metadata)
        return [resources_pb2.Executor(id=f"x{i}", address=a) for i, a in enumerate(self.addresses)]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[GrpcServer] = []

    async def start(executor: FakeExecutor) -> GrpcServer:
        binding = ServiceBinding(
            SERVICE, lambda s: pb_grpc.add_ExecutorServiceServicer_to_server(executor, s)
        )
        server = await start_server([binding])
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop(0)


async def unreachable(serve: Serve) -> str:
    """The address of an executor that is gone (its port refuses connections)."""
    server = await serve(FakeExecutor())
    await server.stop(0)
    return server.address


def router(*addresses: str, registry: FakeRegistry | None = None, discovery: bool = False) -> RunRouter:
    return RunRouter(
        registry or FakeRegistry(),  # type: ignore[arg-type]
        SystemToken(TokenCodec(SECRET)),
        addresses=addresses,
        discovery=discovery,
        refresh_interval_seconds=3600,
        health_interval_seconds=3600,
    )
