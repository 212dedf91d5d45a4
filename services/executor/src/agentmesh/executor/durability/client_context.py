"""The conversation a client that keeps no session sends with its input (RunRequest.context), as
the input's event records it in its metadata: a resumed run goes on with it, and later runs in
the session read it as the session's beginning (run/history.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import struct_pb2

from agentmesh.internal.executor.v1 import executor_service_pb2

CONTEXT_KEY = "context"


def recordable(context: Iterable[executor_service_pb2.ContextMessage]) -> list[dict[str, Any]]:
    """The conversation as the input's metadata holds it."""
    return [{"role": message.role, "content": message.content} for message in context]


def recorded(metadata: struct_pb2.Struct) -> list[executor_service_pb2.ContextMessage]:
    """The conversation an input's metadata holds (none when it came without one)."""
    if CONTEXT_KEY not in metadata.fields:
        return []
    return [
        executor_service_pb2.ContextMessage(
            role=item.struct_value.fields["role"].string_value,
            content=item.struct_value.fields["content"].string_value,
        )
        for item in metadata.fields[CONTEXT_KEY].list_value.values
    ]
