"""The raw gRPC baseline: an echo server and a forwarding proxy, each meant to run as its own OS
process (`python -m bench.echo server|proxy`), and the client calls the harness makes to them.

No protobuf, no interceptors, no database: bytes in, the same bytes out, through plain `grpc.aio`.
The `insert` role is the raw append: a plain `grpc.aio` unary call whose handler
inserts the payload as one row with asyncpg — what one AppendEvents call is compared with. The
`append` role is the floor of an append: the memory service's own statement, run the same way on
its database (`rawdb.memory_append`).

The `relay` and `durable` roles make the floor of a chat: the fewest messages a
one-step chat needs in this design, with nothing else done. `durable` answers a server stream
the way an executor answers a run — it records the input (a unary call to an `insert` server),
sends a first message, records the answer, sends the answer — and `relay` forwards such a stream
as the gateway does: client → relay → durable → insert → PostgreSQL.
This is the physical limit a mesh hop is compared with. A process prints
"echo serving gRPC on HOST:PORT" once it serves, the line `tests.e2e.harness.ServiceProcess`
waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import uuid
from collections.abc import AsyncIterator, Callable

import grpc

METHOD = "/bench.Echo/Echo"
STREAM_METHOD = "/bench.Echo/Stream"


def _identity(data: bytes) -> bytes:
    return data


async def _serve(role: str, port: int, upstream: str | None, dsn: str | None = None) -> None:
    server = grpc.aio.server()
    channel: grpc.aio.Channel | None = None
    pool = None
    if dsn:
        # The raw append: each call's payload becomes one row, one autocommitted INSERT (the
        # rawdb baseline's table), over a pool as wide as the bench's writers; or, for the
        # `append` role, the memory service's one-statement append.
        import asyncpg

        from bench.rawdb import INSERT_ONE, memory_append

        pool = await asyncpg.create_pool(dsn, min_size=16, max_size=16)
        append = memory_append(pool)

        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            if role == "append":
                await append(request)
            else:
                await pool.execute(
                    INSERT_ONE, uuid.uuid4().hex, 1, "bench", "agent_response", request.decode()
                )
            return b""

    elif upstream:
        channel = grpc.aio.insecure_channel(upstream)
        forward = channel.unary_unary(METHOD, request_serializer=_identity, response_deserializer=_identity)

        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return await forward(request)

    else:

        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return request

    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=_identity, response_serializer=_identity
        )
    }
    if role in ("relay", "durable"):
        assert channel is not None
        handlers["Stream"] = grpc.unary_stream_rpc_method_handler(
            _relay(channel) if role == "relay" else _durable(channel),
            request_deserializer=_identity,
            response_serializer=_identity,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", handlers),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    if channel is not None:
        await channel.channel_ready()
    print(f"{role} serving gRPC on 127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop(0.5)
    if channel is not None:
        await channel.close()
    if pool is not None:
        await pool.close()


def _relay(channel: grpc.aio.Channel) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
    """Forwards a stream from upstream, message by message (the gateway's part of a chat)."""
    upstream = stream_call(channel)

    async def handle(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for message in upstream(request):
            yield message

    return handle


def _durable(channel: grpc.aio.Channel) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
    """Records the input, says the run started, records the answer, sends it (an executor's part
    of a one-step chat: the two appends on its critical path, each a unary call to `insert`)."""
    record = echo_call(channel)

    async def handle(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        await record(request)
        yield b"started"
        await record(request)
        yield request

    return handle


def stream_call(channel: grpc.aio.Channel) -> grpc.aio.UnaryStreamMultiCallable:
    """The client side of a floor chain: `async for message in call(payload)`."""
    return channel.unary_stream(STREAM_METHOD, request_serializer=_identity, response_deserializer=_identity)


def echo_call(channel: grpc.aio.Channel) -> grpc.aio.UnaryUnaryMultiCallable:
    """The client side: `await call(payload)` returns the echoed bytes."""
    return channel.unary_unary(METHOD, request_serializer=_identity, response_deserializer=_identity)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["server", "proxy", "insert", "append", "relay", "durable"])
    parser.add_argument("--dsn", help="the PostgreSQL an insert or append server writes to")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream", help="host:port the proxy forwards to")
    args = parser.parse_args()
    if args.role in ("proxy", "relay", "durable") and not args.upstream:
        parser.error(f"a {args.role} needs --upstream")
    if args.role in ("insert", "append") and not args.dsn:
        parser.error(f"an {args.role} server needs --dsn")
    upstream = args.upstream if args.role in ("proxy", "relay", "durable") else None
    asyncio.run(
        _serve(args.role, args.port, upstream, args.dsn if args.role in ("insert", "append") else None)
    )


if __name__ == "__main__":
    main()
