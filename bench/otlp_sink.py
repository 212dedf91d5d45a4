"""An OTLP trace sink for the tracing figure: accepts `TraceService/Export` and throws the spans
away, as cheaply as a gRPC server can, so that what is measured is the services' cost of tracing
(making spans, batching, exporting) and not a collector's. Runs as its own process
(`python -m bench.otlp_sink`) and counts what it received, which `received` asks for — the
harness checks that spans really were exported.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import grpc

EXPORT_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
COUNT_METHOD = "/bench.OtlpSink/Count"


def _identity(data: bytes) -> bytes:
    return data


async def _serve(port: int) -> None:
    received = {"exports": 0, "bytes": 0}

    async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        received["exports"] += 1
        received["bytes"] += len(request)
        return b""  # an empty ExportTraceServiceResponse

    async def count(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return f"{received['exports']} {received['bytes']}".encode()

    def unary(behavior):
        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=_identity, response_serializer=_identity
        )

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(EXPORT_SERVICE, {"Export": unary(export)}),
            grpc.method_handlers_generic_handler("bench.OtlpSink", {"Count": unary(count)}),
        )
    )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"otlp-sink serving gRPC on 127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop(0.5)


async def received(address: str) -> tuple[int, int]:
    """(exports, bytes) the sink at `address` has received so far."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(
            COUNT_METHOD, request_serializer=_identity, response_deserializer=_identity
        )
        exports, size = (await call(b"", timeout=5)).split()
        return int(exports), int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
