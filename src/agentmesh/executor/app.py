"""The executor's composition root: settings → peer channels → runner → servicer → server."""

from __future__ import annotations

from agentmesh.executor.models.factory import ModelFactory
from agentmesh.executor.runner import RunExecutor
from agentmesh.executor.servicer import ExecutorServicer
from agentmesh.executor.settings import ExecutorSettings
from agentmesh.executor.v1 import executor_service_pb2, executor_service_pb2_grpc
from agentmesh.memory.client import MemoryClient
from agentmesh.registry.client import RegistryClient
from agentmesh.runtime.channels import create_channel
from agentmesh.runtime.server import ServiceBinding, start_server
from agentmesh.runtime.service import RunningService

SERVICE_NAME = executor_service_pb2.DESCRIPTOR.services_by_name["ExecutorService"].full_name


async def start(settings: ExecutorSettings) -> RunningService:
    registry_channel = create_channel(settings.registry_address, max_message_bytes=settings.max_message_bytes)
    memory_channel = create_channel(settings.memory_address, max_message_bytes=settings.max_message_bytes)
    runner = RunExecutor(
        settings=settings,
        registry=RegistryClient(registry_channel),
        memory=MemoryClient(memory_channel),
        model_factory=ModelFactory(chunk_chars=settings.text_chunk_chars),
    )
    servicer = ExecutorServicer(runner)
    server = await start_server(
        [
            ServiceBinding(
                SERVICE_NAME,
                lambda s: executor_service_pb2_grpc.add_ExecutorServiceServicer_to_server(servicer, s),
            )
        ],
        host=settings.host,
        port=settings.port,
        max_message_bytes=settings.max_message_bytes,
    )
    return RunningService("executor", server, closers=[registry_channel.close, memory_channel.close])
