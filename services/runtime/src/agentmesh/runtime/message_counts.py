"""Counting gRPC messages, for the benchmark only (what a chat costs is the number of
messages it makes across every hop, more than the number of RPCs).

When `AGENTMESH_COUNT_MESSAGES_DIR` names a directory, every server of the process counts each
message it receives and each it sends, per method — a unary call is two, a server stream one
request plus one per streamed response — by wrapping the method's (de)serializers, which every
message passes through once whatever the method's shape. On SIGUSR1 the process writes its
counts to `<dir>/<pid>.json` (`{"method": [received, sent], …}`), so the benchmark can read
them before and after what it measures. Counting only on the server side counts every message of
the mesh exactly once (each internal call's client is another service whose server counts its
own). Off by default: then nothing is wrapped and nothing costs.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import grpc

from agentmesh.runtime.interceptors import HandlerWrappingInterceptor

COUNT_DIR_ENV = "AGENTMESH_COUNT_MESSAGES_DIR"


class MessageCounter(HandlerWrappingInterceptor):
    """Counts received and sent messages per method; one per process, shared by its servers."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self._directory = directory
        self.counts: dict[str, list[int]] = {}

    def wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        return self._counting(handler, self.counts.setdefault(method, [0, 0]))

    def dump(self) -> Path:
        """Writes the counts so far to `<dir>/<pid>.json` (atomically: write, then rename)."""
        target = self._directory / f"{os.getpid()}.json"
        scratch = target.with_suffix(".tmp")
        scratch.write_text(json.dumps(self.counts))
        scratch.replace(target)
        return target

    @staticmethod
    def _counting(handler: grpc.RpcMethodHandler, counts: list[int]) -> grpc.RpcMethodHandler:
        def received(raw: bytes) -> Any:
            counts[0] += 1
            return handler.request_deserializer(raw) if handler.request_deserializer else raw

        def sent(message: Any) -> bytes:
            counts[1] += 1
            return handler.response_serializer(message) if handler.response_serializer else message

        for shape, build in (
            ("unary_unary", grpc.unary_unary_rpc_method_handler),
            ("unary_stream", grpc.unary_stream_rpc_method_handler),
            ("stream_unary", grpc.stream_unary_rpc_method_handler),
            ("stream_stream", grpc.stream_stream_rpc_method_handler),
        ):
            behavior = getattr(handler, shape)
            if behavior is not None:
                return build(behavior, request_deserializer=received, response_serializer=sent)
        return handler


_counter: MessageCounter | None = None


def message_counter() -> MessageCounter | None:
    """The process's counter when counting is on (installing the SIGUSR1 dump the first time),
    else None."""
    global _counter
    directory = os.environ.get(COUNT_DIR_ENV)
    if not directory:
        return None
    if _counter is None:
        _counter = MessageCounter(Path(directory))
        counter = _counter
        signal.signal(signal.SIGUSR1, lambda *_: counter.dump())
    return _counter
