"""An unexpected server error with tracing off (the default): the client gets a generic INTERNAL,
the operator's log gets the real error with its trace id — never an error about the tracing
itself (a NonRecordingSpan has no name; reading one used to replace every real error)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

# A real server, in its own process so that no tracer provider of the test process applies:
# one unary and one server-streaming method, each raising what a dropped database connection
# might raise.
SCRIPT = r"""
import asyncio, json, logging, sys
import grpc
from agentmesh.runtime.server import ServiceBinding, start_server
from agentmesh.runtime.telemetry import configure_tracing

SERVICE = "agentmesh.test.v1.Broken"

async def unary(request, context):
    raise ConnectionResetError("the database connection was reset")

async def stream(request, context):
    yield b"first"
    raise ConnectionResetError("the database connection was reset mid-stream")

def add(server):
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])

async def main():
    server = await start_server([ServiceBinding(SERVICE, add)], port=0)
    seen = {}
    async with grpc.aio.insecure_channel(server.address) as channel:
        try:
            await channel.unary_unary(f"/{SERVICE}/Unary")(b"", timeout=30)
        except grpc.aio.AioRpcError as error:
            seen["unary"] = [error.code().name, error.details()]
        received = []
        try:
            async for item in channel.unary_stream(f"/{SERVICE}/Stream")(b"", timeout=30):
                received.append(item.decode())
        except grpc.aio.AioRpcError as error:
            seen["stream"] = [error.code().name, error.details(), received]
    await server.stop(1)
    print(json.dumps(seen))

configure_tracing("agentmesh-off")
logging.basicConfig(stream=sys.stderr, level=logging.INFO)
asyncio.run(main())
"""


@pytest.fixture(scope="module")
def run() -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "none"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_client_gets_a_generic_internal_error(run) -> None:
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["unary"] == ["INTERNAL", "internal error"]
    assert seen["stream"] == ["INTERNAL", "internal error", ["first"]]
    assert "NonRecordingSpan" not in run.stdout
    assert "database" not in run.stdout, "internals stay out of the client's error"


def test_the_log_names_the_real_error_and_the_trace(run) -> None:
    assert run.returncode == 0, run.stderr
    assert "NonRecordingSpan" not in run.stderr
    for method, message in (
        ("Unary", "the database connection was reset"),
        ("Stream", "the database connection was reset mid-stream"),
    ):
        assert re.search(
            rf"unhandled error in agentmesh\.test\.v1\.Broken/{method} \(trace_id=[0-9a-f]{{32}}\)",
            run.stderr,
        ), run.stderr
        assert f"ConnectionResetError: {message}" in run.stderr
